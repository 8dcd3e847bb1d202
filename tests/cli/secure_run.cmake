# Secure aggregation end to end: 8 workers on synthetic softmax with random_block and DEF, plain
# and secure, every device masking with every other and with SecAgg+ neighbourhoods, and with
# 5 % of all frames lost (rounds then lose devices in every phase, and some abort). Without
# losses the secure runs end where the plain run does (the unmasked sum is exact; fixed point
# rounds at 2^-24) and abort no round; every secure run pays the protocol's bytes on the uplink,
# and the lossy one still trains. A secure majority vote (counts of +1 votes in lanes) ends with
# the plain vote's loss exactly.
# Signed rounds (--secagg-signed) end exactly where unsigned ones do.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P secure_run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data synthetic --workers 8 --rounds 40 --codec random_block
    --block-ratio 8 --feedback def --lr 0.2 --seed 5)
set(secure --secure-aggregation --secagg-bound 8)
edgesgd_simulate(plain ${common})
edgesgd_simulate(secure ${common} ${secure})
edgesgd_simulate(secure_plus ${common} ${secure} --secagg-neighbours 4)
# Signed rounds (ECDSA keys and the consistency check): the same exact sum, so the same model.
edgesgd_simulate(secure_signed ${common} ${secure} --secagg-signed)
if(NOT secure_signed_loss STREQUAL secure_loss)
  message(FATAL_ERROR "signed rounds end at loss ${secure_signed_loss}, unsigned ones at "
                      "${secure_loss}: the sum differs")
endif()
edgesgd_simulate(lossy ${common} ${secure} --loss 0.05 --round-deadline-s 1)
set(votes --task softmax --data synthetic --workers 8 --rounds 40 --codec sign --aggregate majority
    --optimizer signum --lr 0.01 --downlink aggregate --seed 5)
edgesgd_simulate(vote ${votes})
edgesgd_simulate(vote_secure ${votes} --secure-aggregation)
message(STATUS "majority vote: loss ${vote_secure_loss} secure, ${vote_loss} plain; uplink "
               "${vote_secure_bytes_up} B secure, ${vote_bytes_up} B plain")
if(NOT vote_secure_loss STREQUAL vote_loss OR NOT vote_secure_bytes_up GREATER vote_bytes_up)
  message(FATAL_ERROR "the secure majority vote differs from the plain vote")
endif()
foreach(run secure secure_plus lossy)
  file(READ ${WORK_DIR}/${run}.json summary)
  string(JSON aborted GET "${summary}" network secure_rounds_aborted)
  string(JSON bits GET "${summary}" secure_aggregation fraction_bits)
  message(STATUS "${run}: loss ${${run}_loss} (plain ${plain_loss}), accuracy "
                 "${${run}_accuracy} (plain ${plain_accuracy}), uplink "
                 "${${run}_bytes_up} B (plain ${plain_bytes_up}), ${aborted} rounds aborted, "
                 "${bits} fraction bits")
  if(NOT run STREQUAL "lossy" AND NOT aborted EQUAL 0)
    message(FATAL_ERROR "${run}: ${aborted} secure rounds aborted without a lost frame")
  endif()
  if(NOT bits EQUAL 24)
    message(FATAL_ERROR "${run}: ${bits} fraction bits, not 24")
  endif()
  if(NOT ${run}_bytes_up GREATER plain_bytes_up)
    message(FATAL_ERROR "${run}: the secure uplink is not larger than the plain one")
  endif()
  edgesgd_micro(${${run}_accuracy} accuracy)
  if(run STREQUAL "lossy")
    if(accuracy LESS 800000)
      message(FATAL_ERROR "lossy: trained to ${lossy_accuracy} only")
    endif()
    continue()
  endif()
  edgesgd_micro(${${run}_loss} loss)
  edgesgd_micro(${plain_loss} reference)
  math(EXPR gap "${loss} - ${reference}")
  if(gap GREATER 1000 OR gap LESS -1000)
    message(FATAL_ERROR "${run}: loss ${${run}_loss} against the plain ${plain_loss}")
  endif()
endforeach()
