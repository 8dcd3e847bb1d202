# Experiment E, sized to seconds (8 workers, Fashion-MNIST softmax, batch 64, lr 0.2, 200
# rounds, unbiased QSGD without feedback): DQ-SGD trains (accuracy >= 0.75), ends within one
# point of 8-bit QSGD, sends fewer uplink bytes, and its metrics show the bits it actually used
# (below 8 per coordinate in the first round, more by the last).
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_dq_sgd.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data fashion-mnist --workers 8 --rounds 200 --batch 64 --lr 0.2
    --optimizer sgd --feedback none --codec qsgd --eval-every 200 --seed 1)
edgesgd_simulate(eight ${common} --bits 8)
edgesgd_simulate(dq ${common} --quant-schedule dq --dq-k 20 --dq-rho 0.99
                 --metrics ${WORK_DIR}/dq.csv)
message(STATUS "8-bit: accuracy ${eight_accuracy}, ${eight_bytes_up} bytes up; "
               "dq: accuracy ${dq_accuracy}, ${dq_bytes_up} bytes up")
edgesgd_micro(${eight_accuracy} eight)
edgesgd_micro(${dq_accuracy} dq)
if(dq LESS 750000)
  message(FATAL_ERROR "DQ-SGD reached only ${dq_accuracy} accuracy")
endif()
math(EXPR gap "${eight} - ${dq}")
if(gap GREATER 10000)
  message(FATAL_ERROR "DQ-SGD is ${gap} millionths of accuracy below 8-bit QSGD (allowed 10000)")
endif()
if(NOT dq_bytes_up LESS eight_bytes_up)
  message(FATAL_ERROR "DQ-SGD sent ${dq_bytes_up} bytes up, not fewer than 8-bit's ${eight_bytes_up}")
endif()
# bits_per_coord is the CSV's second-to-last column (epsilon, empty here, is the last).
file(STRINGS ${WORK_DIR}/dq.csv rows)
list(GET rows 1 first_row)
list(GET rows -1 last_row)
string(REGEX MATCH "([^,]+),[^,]*$" unused "${first_row}")
set(first_bits ${CMAKE_MATCH_1})
string(REGEX MATCH "([^,]+),[^,]*$" unused "${last_row}")
set(last_bits ${CMAKE_MATCH_1})
edgesgd_micro(${first_bits} first)
edgesgd_micro(${last_bits} last)
if(NOT first LESS 8000000 OR NOT last GREATER first)
  message(FATAL_ERROR "bits_per_coord does not follow the schedule: ${first_bits} in round 1, "
                      "${last_bits} in round 200")
endif()
message(STATUS "dq bits per coordinate: ${first_bits} in round 1, ${last_bits} in round 200")
