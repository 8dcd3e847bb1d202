# Experiment L, sized to seconds (Fashion-MNIST softmax, 16 devices on a Dirichlet(0.1) label
# split, Signum beta 0.9, lr 0.005, batch 16, the vote as the downlink, 100 rounds, seed 1):
# stochastic-sign majority vote (B = 0.2) ends at least 0.3 above plain sign majority vote, which
# stays below 0.35, with the same bytes up; the plain run warns once about its split, the
# stochastic one does not.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_stochastic_sign.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data fashion-mnist --split dirichlet:0.1 --workers 16 --rounds 100
    --batch 16 --aggregate majority --optimizer signum --momentum 0.9 --lr 0.005
    --downlink aggregate --eval-every 100 --seed 1)
edgesgd_simulate(plain ${common} --codec sign)
edgesgd_simulate(stochastic ${common} --codec stochastic_sign --sign-bound 0.2)
message(STATUS "accuracy after 100 rounds: plain sign ${plain_accuracy}, stochastic sign "
               "${stochastic_accuracy}; ${plain_bytes_up} and ${stochastic_bytes_up} bytes up")

set(warning "warning: plain sign votes train poorly on non-iid data (--split dirichlet:0.1)")
string(FIND "${plain_stderr}" "${warning}" first)
string(FIND "${plain_stderr}" "${warning}" last REVERSE)
if(first EQUAL -1 OR NOT first EQUAL last)
  message(FATAL_ERROR "plain sign on a Dirichlet split should warn once, printed: ${plain_stderr}")
endif()
string(FIND "${stochastic_stderr}" "warning" stochastic_warned)
if(NOT stochastic_warned EQUAL -1)
  message(FATAL_ERROR "stochastic_sign should not warn, printed: ${stochastic_stderr}")
endif()

edgesgd_micro(${plain_accuracy} plain)
edgesgd_micro(${stochastic_accuracy} stochastic)
math(EXPR gain "${stochastic} - ${plain}")
if(plain GREATER_EQUAL 350000)
  message(FATAL_ERROR "plain sign majority vote reached ${plain_accuracy}: no longer stuck")
endif()
if(gain LESS 300000)
  message(FATAL_ERROR "stochastic sign gained only ${gain} millionths of accuracy (need 0.3)")
endif()
if(NOT plain_bytes_up EQUAL stochastic_bytes_up)
  message(FATAL_ERROR "stochastic sign sent ${stochastic_bytes_up} bytes up, plain sign "
                      "${plain_bytes_up}: not one bit per coordinate")
endif()
