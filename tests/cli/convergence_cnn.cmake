# A small CNN (--model) on Fashion-MNIST's first 6,000 training samples, 4 workers, 150 rounds of
# batch 32 with momentum: dense updates reach 70 % test accuracy, and top_k 10 % with error
# feedback ends within two points of them with at least 4x fewer uplink bytes.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_cnn.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --model conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10 --data fashion-mnist
    --train-limit 6000 --workers 4 --rounds 150 --batch 32 --lr 0.05 --momentum 0.9
    --eval-every 150 --seed 1)
edgesgd_simulate(dense ${common} --codec identity --feedback none)
edgesgd_simulate(top_k ${common} --codec top_k --k-ratio 0.1 --feedback ef)
message(STATUS "dense ${dense_accuracy} (${dense_bytes_up} B up), top_k + EF ${top_k_accuracy} "
               "(${top_k_bytes_up} B up)")
edgesgd_micro(${dense_accuracy} dense)
edgesgd_micro(${top_k_accuracy} sparse)
if(dense LESS 700000)
  message(FATAL_ERROR "the dense CNN reached ${dense_accuracy}, expected at least 0.70")
endif()
math(EXPR gap "${dense} - ${sparse}")
if(gap GREATER 20000)
  message(FATAL_ERROR "top_k + EF is ${gap} millionths of accuracy below dense (allowed 20000)")
endif()
math(EXPR four_times "4 * ${top_k_bytes_up}")
if(four_times GREATER dense_bytes_up)
  message(FATAL_ERROR "top_k sent ${top_k_bytes_up} B up against dense ${dense_bytes_up} B: "
                      "less than 4x fewer")
endif()
