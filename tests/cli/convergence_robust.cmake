# Robust aggregation on honest devices (8 workers, Fashion-MNIST softmax, batch 64, lr 0.2, 200
# rounds, dense updates): each rule trains as well as the mean, within one point of its
# accuracy. Then one attack the mean does not survive and the median does.
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

# Under attack (workers 1-2 of 10 send -10 times their gradient): the mean breaks, the median
# does not; the summary names the attack and the strength it used.
set(attacked --task softmax --data fashion-mnist --workers 10 --rounds 150 --batch 64 --lr 0.2
    --optimizer sgd --feedback none --eval-every 150 --seed 1 --attack sign_flip --attackers 2
    --attack-strength 10)
edgesgd_simulate(attacked_mean ${attacked})
edgesgd_simulate(attacked_median ${attacked} --robust median)
message(STATUS "sign flip x10 by 2 of 10: mean ${attacked_mean_accuracy}, "
               "median ${attacked_median_accuracy}")
edgesgd_micro(${attacked_mean_accuracy} broken)
edgesgd_micro(${attacked_median_accuracy} kept)
if(broken GREATER_EQUAL 500000 OR kept LESS 750000)
  message(FATAL_ERROR "expected the mean below 0.5 and the median at 0.75 or more under attack: "
                      "mean ${attacked_mean_accuracy}, median ${attacked_median_accuracy}")
endif()
file(READ ${WORK_DIR}/attacked_median.json summary)
string(JSON kind GET "${summary}" attack kind)
string(JSON strength GET "${summary}" attack strength)
if(NOT kind STREQUAL "sign_flip" OR NOT strength EQUAL 10)
  message(FATAL_ERROR "the summary's attack section is '${kind}' at ${strength}")
endif()
