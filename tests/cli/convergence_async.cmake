# Buffered asynchronous aggregation against synchronous rounds on a heavy-tailed fleet: 100
# workers with lognormal(sigma 1) compute speeds, 10 of them training at a time, Fashion-MNIST
# softmax, 5 local steps of batch 32, the same 1,000 updates either way (100 rounds of 10, or
# 200 versions of K = 5). Dense and top_k 1 % + EF: the buffered run reaches the synchronous
# run's accuracy (within a point) in at most half its simulated time, and the summary names the
# buffer.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P convergence_async.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data fashion-mnist --workers 100 --participation 0.1
    --device-speeds lognormal:1 --local-steps 5 --batch 32 --lr 0.1 --seed 1)
set(dense_flags --codec identity --feedback none)
set(top_k_flags --codec top_k --k-ratio 0.01 --feedback ef)
foreach(codec dense top_k)
  edgesgd_simulate(${codec}_sync ${common} ${${codec}_flags} --rounds 100 --eval-every 100)
  edgesgd_simulate(${codec}_async ${common} ${${codec}_flags} --rounds 200 --eval-every 200
                   --buffer 5)
  message(STATUS "${codec}: synchronous ${${codec}_sync_accuracy} in ${${codec}_sync_time_s} s, "
                 "buffered ${${codec}_async_accuracy} in ${${codec}_async_time_s} s")
  edgesgd_micro(${${codec}_sync_accuracy} sync_accuracy)
  edgesgd_micro(${${codec}_async_accuracy} async_accuracy)
  edgesgd_micro(${${codec}_sync_time_s} sync_time)
  edgesgd_micro(${${codec}_async_time_s} async_time)
  math(EXPR gap "${sync_accuracy} - ${async_accuracy}")
  math(EXPR twice "2 * ${async_time}")
  if(gap GREATER 10000 OR twice GREATER sync_time)
    message(FATAL_ERROR "${codec}: expected the buffered run within a point of the synchronous "
                        "accuracy in at most half its time")
  endif()
endforeach()
file(READ ${WORK_DIR}/top_k_async.json summary)
string(JSON buffer GET "${summary}" async buffer)
string(JSON staleness GET "${summary}" async staleness)
if(NOT buffer EQUAL 5 OR NOT staleness STREQUAL "sqrt")
  message(FATAL_ERROR "the summary's async section is buffer '${buffer}', staleness '${staleness}'")
endif()
