# docs/algorithms.md §6 on the command line: heterogeneous linear regression (experiment A's
# generator, full local gradients) on a ring of 12 with weights 1/3, every algorithm sending 2400 vectors per
# neighbour. D-PSGD must stall at its bias floor; gradient tracking and DeTAG must reach the
# optimum (log10 ||mean x - x*||^2 from the summary JSON).
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P gossip_tracking.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(common simulate --mode gossip --topology ring --gossip-weights uniform --task linreg
           --workers 12 --dim 20 --samples 100 --batch 0 --lr 0.02 --quiet)
foreach(run "dpsgd;2400" "gt;1200" "detag;300")
  list(GET run 0 algorithm)
  list(GET run 1 rounds)
  execute_process(COMMAND ${EDGESGD} ${common} --gossip ${algorithm} --rounds ${rounds}
                          --summary ${WORK_DIR}/${algorithm}.json
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${algorithm} failed (${result}): ${err}")
  endif()
  file(READ ${WORK_DIR}/${algorithm}.json summary)
  string(JSON distance GET "${summary}" final dist_to_opt)
  string(JSON steps GET "${summary}" gossip gossip_steps)
  set(${algorithm}_distance ${distance})
  message(STATUS "${algorithm}: log10 ||x - x*||^2 = ${distance} (R = ${steps})")
endforeach()
if(detag_distance GREATER -6 OR gt_distance GREATER -6)
  message(FATAL_ERROR "tracking did not converge: gt ${gt_distance}, detag ${detag_distance}")
endif()
if(dpsgd_distance LESS -2)
  message(FATAL_ERROR "D-PSGD reached ${dpsgd_distance}: no bias floor on heterogeneous data?")
endif()
