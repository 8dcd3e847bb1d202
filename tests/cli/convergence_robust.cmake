# Robust aggregation on honest devices (8 workers, Fashion-MNIST softmax, batch 64, lr 0.2, 200
# rounds, dense updates): each rule trains as well as the mean, within one point of its
# accuracy. What each buys against attackers is checked by the protocol tests.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_robust.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data fashion-mnist --workers 8 --rounds 200 --batch 64 --lr 0.2
    --optimizer sgd --feedback none --eval-every 200 --seed 1)
edgesgd_simulate(mean ${common})
edgesgd_micro(${mean_accuracy} mean)
foreach(rule median trimmed_mean multi_krum centered_clipping)
  set(extra)
  if(rule STREQUAL "trimmed_mean" OR rule STREQUAL "multi_krum")
    set(extra --robust-f 2)
  endif()
  edgesgd_simulate(${rule} ${common} --robust ${rule} ${extra})
  message(STATUS "${rule}: accuracy ${${rule}_accuracy} (mean ${mean_accuracy})")
  edgesgd_micro(${${rule}_accuracy} robust)
  math(EXPR gap "${mean} - ${robust}")
  if(gap GREATER 10000)
    message(FATAL_ERROR "${rule} is ${gap} millionths of accuracy below the mean (allowed 10000)")
  endif()
endforeach()
