# A fleet of 10,000 simulated devices, 1 % of them sampled per round, 100 rounds of
# Fashion-MNIST softmax regression: the run completes (every round with its 100 devices) and
# trains, and one device thread and two give the same metrics byte for byte, as do devices that
# keep their idle buffers between rounds and devices that release them (the default). The full
# 1,000-round run, its time and its memory are figures in docs/memory.md, not a timed test.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P fleet_10000.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(fleet --task softmax --data fashion-mnist --workers 10000 --participation 0.01 --rounds 100
    --eval-every 50 --seed 1)
edgesgd_simulate(fleet ${fleet} --threads 2 --metrics ${WORK_DIR}/two.csv)
edgesgd_simulate(one_thread ${fleet} --threads 1 --metrics ${WORK_DIR}/one.csv)
file(SHA256 ${WORK_DIR}/one.csv one)
file(SHA256 ${WORK_DIR}/two.csv two)
if(NOT one STREQUAL two)
  message(FATAL_ERROR "one device thread and two gave different metrics")
endif()
edgesgd_simulate(kept ${fleet} --threads 2 --idle-memory keep --metrics ${WORK_DIR}/kept.csv)
file(SHA256 ${WORK_DIR}/kept.csv kept)
if(NOT kept STREQUAL two)
  message(FATAL_ERROR "keeping the idle buffers changed the metrics")
endif()
file(READ ${WORK_DIR}/fleet.json summary)
string(JSON rounds GET "${summary}" final round)
string(JSON accepted GET "${summary}" network updates_accepted)
edgesgd_micro(${fleet_accuracy} accuracy)
message(STATUS "10,000 devices: ${rounds} rounds, ${accepted} updates, accuracy ${fleet_accuracy}")
if(NOT rounds EQUAL 100 OR NOT accepted EQUAL 10000 OR accuracy LESS 650000)
  message(FATAL_ERROR "expected 100 rounds of 100 updates reaching 0.65 accuracy")
endif()
