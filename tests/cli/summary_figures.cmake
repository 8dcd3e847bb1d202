# Helpers for convergence checks that run `edgesgd simulate` and compare figures of its summary
# JSON. include() it from a -P script that defines EDGESGD and WORK_DIR.

# edgesgd_simulate(NAME FLAGS...): runs `edgesgd simulate FLAGS --summary WORK_DIR/NAME.json
# --quiet` and sets NAME_loss, NAME_accuracy, NAME_bytes_up and NAME_time_s (the final row's figures, as
# written) and NAME_stderr (what it printed there) in the caller's scope. A failing run stops the
# script.
function(edgesgd_simulate name)
  execute_process(COMMAND ${EDGESGD} simulate ${ARGN} --summary ${WORK_DIR}/${name}.json --quiet
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "run ${name} failed (${result}): ${err}")
  endif()
  set(${name}_stderr "${err}" PARENT_SCOPE)
  file(READ ${WORK_DIR}/${name}.json summary)
  foreach(field loss accuracy bytes_up time_s)
    string(JSON value GET "${summary}" final ${field})
    set(${name}_${field} ${value} PARENT_SCOPE)
  endforeach()
endfunction()

# edgesgd_micro(VALUE OUT): a non-negative decimal figure as written by the summary (e.g. 0.5617,
# 13.94, 1e-05) in integer millionths, truncated, so that CMake's integer math can compare it.
function(edgesgd_micro value out)
  if(NOT value MATCHES "^([0-9]+)(\\.([0-9]+))?([eE]([-+]?[0-9]+))?$")
    message(FATAL_ERROR "not a non-negative decimal number: '${value}'")
  endif()
  set(digits "${CMAKE_MATCH_1}${CMAKE_MATCH_3}")
  string(LENGTH "${CMAKE_MATCH_1}" point)  # digits before the decimal point
  set(exponent 0)
  if(CMAKE_MATCH_5)
    string(REGEX REPLACE "^\\+" "" exponent "${CMAKE_MATCH_5}")
  endif()
  math(EXPR keep "${point} + ${exponent} + 6")  # digits of the value in millionths
  if(keep LESS_EQUAL 0)
    set(${out} 0 PARENT_SCOPE)
    return()
  endif()
  if(keep GREATER 17)
    message(FATAL_ERROR "figure too large to compare: '${value}'")
  endif()
  string(LENGTH "${digits}" length)
  while(length LESS keep)
    string(APPEND digits "0")
    math(EXPR length "${length} + 1")
  endwhile()
  string(SUBSTRING "${digits}" 0 ${keep} digits)
  # No leading zeros (no octal surprises). A match-all replace would apply "^" again after each
  # match (0.604 became 640), so strip them once.
  string(REGEX MATCH "[1-9][0-9]*$" digits "${digits}")
  if(digits STREQUAL "")
    set(digits 0)
  endif()
  set(${out} ${digits} PARENT_SCOPE)
endfunction()
