# --attack label_flip end to end (synthetic softmax, 4 workers, the mean, 60 rounds): one
# label-flipping worker of 4 does not stop training, three of 4 teach the model the flipped
# classes, and the summary's attack section names the attack and writes no strength.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P attack_label_flip.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data synthetic --workers 4 --rounds 60 --lr 0.1 --optimizer sgd
    --feedback none --eval-every 60 --seed 1)
edgesgd_simulate(honest ${common})
edgesgd_simulate(minority ${common} --attack label_flip --attackers 1)
edgesgd_simulate(majority ${common} --attack label_flip --attackers 3)
message(STATUS "accuracy: honest ${honest_accuracy}, 1 of 4 flipping ${minority_accuracy}, "
               "3 of 4 flipping ${majority_accuracy}")
edgesgd_micro(${honest_accuracy} honest)
edgesgd_micro(${minority_accuracy} minority)
edgesgd_micro(${majority_accuracy} majority)
if(honest LESS 900000 OR minority LESS 900000 OR majority GREATER_EQUAL 500000)
  message(FATAL_ERROR "expected 0.9 or more honest and with 1 of 4 flipping, below 0.5 with 3 "
                      "of 4: ${honest_accuracy}, ${minority_accuracy}, ${majority_accuracy}")
endif()
file(READ ${WORK_DIR}/majority.json summary)
string(JSON kind GET "${summary}" attack kind)
string(JSON attackers GET "${summary}" attack attackers)
string(JSON strength ERROR_VARIABLE no_strength GET "${summary}" attack strength)
if(NOT kind STREQUAL "label_flip" OR NOT attackers EQUAL 3 OR NOT no_strength)
  message(FATAL_ERROR "the summary's attack section is '${kind}', ${attackers} attackers, "
                      "strength '${strength}'")
endif()
