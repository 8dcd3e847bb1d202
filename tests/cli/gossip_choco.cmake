# CHOCO and BEER on the command line (docs/algorithms.md §6): softmax regression on synthetic
# data, ring of 8, 300 rounds each. Dense D-PSGD and CHOCO with top_k 10 % (its default consensus
# step) must both reach the loss threshold, CHOCO with at most a third of D-PSGD's bytes per
# peer; BEER with top_k 10 % too, with at most half of D-PSGD's bytes (it sends two compressed
# vectors per round); sign and qsgd CHOCO runs and a sign BEER run must finish with a finite loss.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P gossip_choco.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(threshold 0.01)
set(common simulate --mode gossip --topology ring --task softmax --data synthetic --workers 8
           --feedback none --lr 0.1 --eval-every 50 --quiet)
foreach(run "dpsgd;300;--gossip;dpsgd"
            "top_k;300;--gossip;choco;--codec;top_k;--k-ratio;0.1"
            "sign;300;--gossip;choco;--codec;sign"
            "qsgd;300;--gossip;choco;--codec;qsgd;--bits;6"
            "beer_top_k;300;--gossip;beer;--codec;top_k;--k-ratio;0.1"
            "beer_sign;300;--gossip;beer;--codec;sign")
  list(GET run 0 name)
  list(GET run 1 rounds)
  list(SUBLIST run 2 -1 flags)
  execute_process(COMMAND ${EDGESGD} ${common} ${flags} --rounds ${rounds}
                          --summary ${WORK_DIR}/${name}.json
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${name} failed (${result}): ${err}")
  endif()
  file(READ ${WORK_DIR}/${name}.json summary)
  string(JSON loss GET "${summary}" final loss)
  string(JSON bytes GET "${summary}" final bytes_up)
  set(${name}_loss ${loss})
  set(${name}_bytes ${bytes})
  message(STATUS "${name}: loss ${loss} after ${rounds} rounds, ${bytes} bytes sent per peer")
  if(NOT loss LESS 100)
    message(FATAL_ERROR "${name} ended with loss ${loss}")
  endif()
endforeach()
if(dpsgd_loss GREATER threshold OR top_k_loss GREATER threshold OR
   beer_top_k_loss GREATER threshold)
  message(FATAL_ERROR "loss above ${threshold}: D-PSGD ${dpsgd_loss}, CHOCO top_k ${top_k_loss}, "
                      "BEER top_k ${beer_top_k_loss}")
endif()
math(EXPR beer_budget "${dpsgd_bytes} / 2")
if(beer_top_k_bytes GREATER beer_budget)
  message(FATAL_ERROR "BEER top_k sent ${beer_top_k_bytes} bytes per peer, D-PSGD ${dpsgd_bytes}")
endif()
math(EXPR budget "${dpsgd_bytes} / 3")
if(top_k_bytes GREATER budget)
  message(FATAL_ERROR "CHOCO top_k sent ${top_k_bytes} bytes per peer, D-PSGD ${dpsgd_bytes}")
endif()
