# The Fashion-MNIST acceptance run (softmax regression, 8 workers, iid): dense SGD reaches
# >= 83% test accuracy; sign + majority vote and top_k (1%) + EF come within 2 points of it
# while sending >= 25x fewer uplink bytes. The same settings as examples/run_demo.sh, minus
# the link model (virtual time does not change the arithmetic).
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P fashion_mnist_acceptance.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common simulate --task softmax --data fashion-mnist --workers 8 --rounds 3000 --batch 32
    --seed 1 --eval-every 3000 --quiet)
set(run_dense --codec identity --optimizer momentum --momentum 0.9 --lr 0.05)
set(run_sign --codec sign --aggregate majority --optimizer signum --momentum 0.9 --lr 0.001
    --downlink aggregate)
set(run_top_k --codec top_k --k-ratio 0.01 --feedback ef --optimizer sgd --lr 0.5)
foreach(name dense sign top_k)
  execute_process(COMMAND ${EDGESGD} ${common} ${run_${name}}
                          --summary ${WORK_DIR}/${name}.json
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${name} run failed (${result}): ${err}")
  endif()
  file(READ ${WORK_DIR}/${name}.json summary)
  string(JSON accuracy_${name} GET "${summary}" final accuracy)
  string(JSON bytes_up_${name} GET "${summary}" final bytes_up)
  message(STATUS "${name}: accuracy ${accuracy_${name}}, uplink bytes ${bytes_up_${name}}")
endforeach()
# CMake has no float comparison: compare accuracies in basis points.
function(to_basis_points value out)
  math(EXPR points "0")
  string(REGEX MATCH "^0\\.([0-9][0-9][0-9][0-9])" digits "${value}")
  if(NOT digits)
    message(FATAL_ERROR "unexpected accuracy '${value}'")
  endif()
  math(EXPR points "1${CMAKE_MATCH_1} - 10000")
  set(${out} ${points} PARENT_SCOPE)
endfunction()
to_basis_points(${accuracy_dense} dense)
if(dense LESS 8300)
  message(FATAL_ERROR "dense SGD reached ${accuracy_dense} < 0.83")
endif()
foreach(name sign top_k)
  to_basis_points(${accuracy_${name}} points)
  math(EXPR gap "${dense} - ${points}")
  if(gap GREATER 200)
    message(FATAL_ERROR "${name} is ${gap} basis points below dense SGD (allowed: 200)")
  endif()
  math(EXPR ratio_x10 "10 * ${bytes_up_dense} / ${bytes_up_${name}}")
  if(ratio_x10 LESS 250)
    message(FATAL_ERROR "${name} sends only ${ratio_x10}/10 x fewer uplink bytes (need 25x)")
  endif()
  message(STATUS "${name}: ${gap} basis points from dense, ${ratio_x10}/10 x fewer bytes up")
endforeach()
