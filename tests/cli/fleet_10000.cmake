# A fleet of 10,000 simulated devices, 1 % of them sampled per round, 100 rounds of
# Fashion-MNIST softmax regression: the run completes (every round with its 100 devices) and
# trains. The full 1,000-round run and its memory are figures of the closing benchmark
# (docs/memory.md), not a timed test.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P fleet_10000.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
edgesgd_simulate(fleet --task softmax --data fashion-mnist --workers 10000 --participation 0.01
                 --rounds 100 --eval-every 100 --seed 1)
file(READ ${WORK_DIR}/fleet.json summary)
string(JSON rounds GET "${summary}" final round)
string(JSON accepted GET "${summary}" network updates_accepted)
edgesgd_micro(${fleet_accuracy} accuracy)
message(STATUS "10,000 devices: ${rounds} rounds, ${accepted} updates, accuracy ${fleet_accuracy}")
if(NOT rounds EQUAL 100 OR NOT accepted EQUAL 10000 OR accuracy LESS 650000)
  message(FATAL_ERROR "expected 100 rounds of 100 updates reaching 0.65 accuracy")
endif()
