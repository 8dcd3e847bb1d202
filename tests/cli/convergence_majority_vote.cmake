# Experiment D, sized to seconds (Fashion-MNIST softmax, Signum beta 0.9, lr 0.002, batch 16 per
# worker, 150 rounds): the majority vote of 9 workers ends at a lower test loss than one worker
# (summed over three seeds), and with 3 of the 9 negating their gradients (--attack sign_flip,
# so their votes are negated) the loss still falls below half of its starting ln 10 = 2.3026 in
# every seed.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_majority_vote.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data fashion-mnist --rounds 150 --batch 16 --codec sign
    --aggregate majority --optimizer signum --momentum 0.9 --lr 0.002 --eval-every 150)
set(sum_1 0)
set(sum_9 0)
foreach(seed 1 2 3)
  foreach(workers 1 9)
    edgesgd_simulate(m${workers}_${seed} ${common} --workers ${workers} --seed ${seed})
    edgesgd_micro(${m${workers}_${seed}_loss} loss)
    math(EXPR sum_${workers} "${sum_${workers}} + ${loss}")
  endforeach()
  edgesgd_simulate(attacked_${seed} ${common} --workers 9 --attack sign_flip --attackers 3
                   --seed ${seed})
  edgesgd_micro(${attacked_${seed}_loss} attacked)
  message(STATUS "seed ${seed}: loss M=1 ${m1_${seed}_loss}, M=9 ${m9_${seed}_loss}, M=9 with 3 "
                 "sign-flip attackers ${attacked_${seed}_loss}")
  if(attacked GREATER 1151292)
    message(FATAL_ERROR "3 of 9 sign-flip attackers kept the loss at ${attacked_${seed}_loss} "
                        "(seed ${seed}): not below half of ln 10")
  endif()
endforeach()
if(NOT sum_9 LESS sum_1)
  message(FATAL_ERROR "9 voters did not beat 1: summed loss ${sum_9} vs ${sum_1} (millionths)")
endif()
message(STATUS "majority vote: summed loss M=9 ${sum_9} < M=1 ${sum_1} millionths")
