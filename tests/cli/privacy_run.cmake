# A private run end to end: 32 workers, each sampled for a round with probability a quarter,
# central and distributed noise (z = 0.5, C = 1: a large epsilon, this checks the plumbing, not
# the privacy), with a fixed and an adaptive bound. All train and write the summary's epsilon to
# the last row's epsilon column. With central noise every round that released an aggregate
# carried z C, so the epsilon is the one `privacy-budget` computes for the same sampling rate,
# noise multiplier and rounds. With distributed noise a round carries the shares of those who
# reported, more or fewer than the expected cohort, so its epsilon is near that figure but not
# equal (the protocol tests check it against an independent account).
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P privacy_run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${EDGESGD} privacy-budget --sampling-rate 0.25 --noise-multiplier 0.5
                        --rounds 30 --delta 1e-5 --json
                OUTPUT_VARIABLE budget RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "privacy-budget failed: ${budget}")
endif()
string(JSON expected GET "${budget}" epsilon)
set(common --task softmax --data synthetic --workers 32 --participation 0.25 --rounds 30
    --codec random_block --block-ratio 4 --downlink aggregate --lr 0.2 --seed 3
    --dp-clip 1 --dp-noise-multiplier 0.5 --dp-delta 1e-5)
edgesgd_micro(${expected} expected_micro)
# Adaptive clipping (the median update norm) spends the same budget: the count shares it.
set(adaptive_flags --dp-target-quantile 0.5 --dp-count-noise 2)
foreach(mode central distributed)
  edgesgd_simulate(${mode} ${common} --dp-mode ${mode} --metrics ${WORK_DIR}/${mode}.csv)
  edgesgd_simulate(${mode}_adaptive ${common} --dp-mode ${mode} ${adaptive_flags})
  file(READ ${WORK_DIR}/${mode}_adaptive.json adaptive_summary)
  string(JSON adaptive_epsilon GET "${adaptive_summary}" privacy epsilon)
  string(JSON quantile GET "${adaptive_summary}" privacy target_quantile)
  message(STATUS "${mode} with adaptive clipping: accuracy ${${mode}_adaptive_accuracy}, "
                 "epsilon ${adaptive_epsilon}, target quantile ${quantile}")
  edgesgd_micro(${${mode}_adaptive_accuracy} adaptive_accuracy)
  if(NOT quantile STREQUAL "0.5" OR adaptive_accuracy LESS 900000)
    message(FATAL_ERROR "${mode} with adaptive clipping: target quantile ${quantile}, accuracy "
                        "${${mode}_adaptive_accuracy} (< 0.9)")
  endif()
  file(READ ${WORK_DIR}/${mode}.json summary)
  string(JSON reported GET "${summary}" privacy epsilon)
  string(JSON sampling GET "${summary}" privacy sampling_rate)
  file(STRINGS ${WORK_DIR}/${mode}.csv rows)
  list(GET rows -1 last_row)
  string(REGEX MATCH "[^,]+$" column "${last_row}")
  message(STATUS "${mode}: accuracy ${${mode}_accuracy}, epsilon ${reported} (column ${column}, "
                 "privacy-budget ${expected}), sampling rate ${sampling}")
  # Written with 9 and 10 significant digits: equal to a millionth.
  edgesgd_micro(${reported} reported_micro)
  edgesgd_micro(${column} column_micro)
  math(EXPR column_gap "${column_micro} - ${reported_micro}")
  if(column_gap GREATER 1 OR column_gap LESS -1)
    message(FATAL_ERROR "${mode}: the summary's epsilon ${reported} is not the CSV's ${column}")
  endif()
  math(EXPR summary_gap "${reported_micro} - ${expected_micro}")
  if(mode STREQUAL "central" AND (summary_gap GREATER 1 OR summary_gap LESS -1))
    message(FATAL_ERROR "central: epsilon ${reported} differs from privacy-budget's ${expected}")
  endif()
  math(EXPR half "${expected_micro} / 2")
  math(EXPR twice "${expected_micro} * 2")
  if(reported_micro LESS half OR reported_micro GREATER twice)
    message(FATAL_ERROR "${mode}: epsilon ${reported} is far from privacy-budget's ${expected}")
  endif()
  if(NOT sampling STREQUAL "0.25")
    message(FATAL_ERROR "${mode}: sampling rate ${sampling}, expected 0.25")
  endif()
  edgesgd_micro(${${mode}_accuracy} accuracy)
  if(accuracy LESS 900000)
    message(FATAL_ERROR "${mode}: accuracy ${${mode}_accuracy} (< 0.9; 1.0 without privacy): "
                        "the private run did not train")
  endif()
endforeach()
