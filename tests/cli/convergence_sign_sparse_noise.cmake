# Experiment C, sized to seconds: on f(x) = 1/2 ||x||^2 with N(0, 100^2) noise on coordinate 0
# only, signSGD (lr 1e-2) ends below SGD (lr 1e-3) after 2,000 steps, summed over three seeds,
# and reaches f < 1 from about 50.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_sign_sparse_noise.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task quadratic-noise --dim 100 --workers 1 --rounds 2000 --eval-every 2000)
set(sum_sgd 0)
set(sum_sign 0)
foreach(seed 1 2 3)
  edgesgd_simulate(sgd_${seed} ${common} --seed ${seed} --codec identity --feedback none
                   --optimizer sgd --lr 0.001)
  edgesgd_simulate(sign_${seed} ${common} --seed ${seed} --codec sign --aggregate majority
                   --optimizer signum --momentum 0 --lr 0.01)
  edgesgd_micro(${sgd_${seed}_loss} sgd)
  edgesgd_micro(${sign_${seed}_loss} sign)
  math(EXPR sum_sgd "${sum_sgd} + ${sgd}")
  math(EXPR sum_sign "${sum_sign} + ${sign}")
  message(STATUS "seed ${seed}: SGD f = ${sgd_${seed}_loss}, signSGD f = ${sign_${seed}_loss}")
endforeach()
if(NOT sum_sign LESS sum_sgd)
  message(FATAL_ERROR "signSGD did not beat SGD: summed f ${sum_sign} vs ${sum_sgd} (millionths)")
endif()
if(NOT sum_sign LESS 3000000)
  message(FATAL_ERROR "signSGD mean f is not below 1 after 2000 steps (sum ${sum_sign} millionths)")
endif()
message(STATUS "signSGD beats SGD: summed f ${sum_sign} vs ${sum_sgd} millionths")
