# A codec with error feedback trains as well as dense SGD on a small problem (synthetic softmax
# regression, 4 workers, stopped early while the loss still falls): final loss within 2 % of
# dense SGD's, accuracy within a point, and at least MIN_RATIO_X10/10 times fewer uplink bytes.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -DCODEC=name -DMIN_RATIO_X10=n -P codec_convergence.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --task softmax --data synthetic --workers 4 --rounds 40 --batch 32 --lr 0.05
    --optimizer sgd --eval-every 40 --seed 3)
edgesgd_simulate(dense ${common} --codec identity --feedback none)
edgesgd_simulate(codec ${common} --codec ${CODEC} --feedback ef)
message(STATUS "dense: loss ${dense_loss}, accuracy ${dense_accuracy}, ${dense_bytes_up} bytes "
               "up; ${CODEC} + EF: loss ${codec_loss}, accuracy ${codec_accuracy}, "
               "${codec_bytes_up} bytes up")
edgesgd_micro(${dense_loss} dense_loss)
edgesgd_micro(${codec_loss} codec_loss)
edgesgd_micro(${dense_accuracy} dense_accuracy)
edgesgd_micro(${codec_accuracy} codec_accuracy)
math(EXPR loss_excess "(${codec_loss} - ${dense_loss}) * 100")
math(EXPR loss_allowed "2 * ${dense_loss}")
math(EXPR accuracy_gap "${dense_accuracy} - ${codec_accuracy}")
if(loss_excess GREATER loss_allowed OR accuracy_gap GREATER 10000)
  message(FATAL_ERROR "${CODEC} + EF trained worse than dense SGD (allowed: loss 2 % higher, "
                      "accuracy 0.01 lower)")
endif()
math(EXPR ratio_x10 "10 * ${dense_bytes_up} / ${codec_bytes_up}")
if(ratio_x10 LESS MIN_RATIO_X10)
  message(FATAL_ERROR "${CODEC} sent only ${ratio_x10}/10 x fewer bytes up than dense "
                      "(need ${MIN_RATIO_X10}/10)")
endif()
