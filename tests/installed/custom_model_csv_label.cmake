# The custom_model example's --csv-label: its two-moons data, which it writes label first, moved
# label last trains as well with --csv-label last, and without the flag is refused at its first
# row by a message that names the flag. Invoked with -DPROGRAM (the example built by the test
# custom_model_example) and -DWORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# One round is enough to write the data; the accuracy does not matter here.
execute_process(COMMAND ${PROGRAM} --out ${WORK_DIR} --rounds 1 --min-accuracy 0
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
file(STRINGS ${WORK_DIR}/two_moons.csv rows)
list(GET rows 0 header)
if(NOT header STREQUAL "label,x,y")
  message(FATAL_ERROR "two_moons.csv begins '${header}', expected the label first: 'label,x,y'")
endif()
set(label_last)
foreach(row IN LISTS rows)
  string(REGEX REPLACE "^([^,]*),(.*)$" "\\2,\\1" row "${row}")
  string(APPEND label_last "${row}\n")
endforeach()
file(WRITE ${WORK_DIR}/label_last.csv "${label_last}")

execute_process(COMMAND ${PROGRAM} --csv ${WORK_DIR}/label_last.csv --csv-label last
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "--csv-label last failed (${result}):\n${out}${err}")
endif()

execute_process(COMMAND ${PROGRAM} --csv ${WORK_DIR}/label_last.csv
                RESULT_VARIABLE result OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT result EQUAL 2 OR NOT err MATCHES
   "label_last.csv:2: the label '[^']*' is not a class index from 0 to 999 \\(the label is read from the first column; pass --csv-label last if it is the last\\)")
  message(FATAL_ERROR "label-last data read label first: expected exit 2 and the --csv-label "
                      "hint, got ${result}:\n${err}")
endif()
message(STATUS "label last: trains with --csv-label last, refused without it")
