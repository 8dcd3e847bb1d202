# The same samples as IDX (plain with explicit labels, gzip with labels beside), CSV (label first,
# and label last read with --csv-label last) and .npy (tests/cli/data_files.py wrote them to
# DATA_DIR) train to byte-identical metrics, and learn;
# `train` reads the first 200 samples of a CSV training set (--limit) with a .npy test set.
#   cmake -DEDGESGD=path -DDATA_DIR=dir -DWORK_DIR=dir -P data_file_runs.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(d ${DATA_DIR})
set(runs
    "idx|idx:${d}/train-images-idx3-ubyte,${d}/train-labels-idx1-ubyte|idx:${d}/t10k-images-idx3-ubyte"
    "idx_gzip|idx:${d}/train-images-idx3-ubyte.gz|idx:${d}/t10k-images-idx3-ubyte.gz"
    "csv|csv:${d}/train.csv|csv:${d}/t10k.csv"
    "csv_label_last|csv:${d}/train-label-last.csv|csv:${d}/t10k-label-last.csv"
    "npy|npy:${d}/train-x.npy,${d}/train-y.npy|npy:${d}/t10k-x.npy,${d}/t10k-y.npy")
# A run's flags beyond the common ones, by its name.
set(flags_csv_label_last --csv-label last)
set(first_hash)
foreach(run ${runs})
  string(REPLACE "|" ";" parts "${run}")
  list(GET parts 0 name)
  list(GET parts 1 data)
  list(GET parts 2 test_data)
  execute_process(COMMAND ${EDGESGD} simulate --data ${data} --test-data ${test_data}
                          ${flags_${name}} --workers 4 --rounds 30 --lr 0.5 --quiet
                          --metrics ${WORK_DIR}/${name}.csv
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "run ${name} failed (${result}): ${err}")
  endif()
  file(SHA256 ${WORK_DIR}/${name}.csv hash)
  if(NOT first_hash)
    set(first_hash ${hash})
  elseif(NOT hash STREQUAL first_hash)
    message(FATAL_ERROR "run ${name} gave other metrics than the IDX run: the readers differ")
  endif()
endforeach()

# round,time_s,loss,accuracy,...: the last row's accuracy on the 60 test samples.
file(STRINGS ${WORK_DIR}/idx.csv rows)
list(GET rows -1 last)
string(REPLACE "," ";" cells "${last}")
list(GET cells 3 accuracy)
if(accuracy LESS 0.9)
  message(FATAL_ERROR "test accuracy ${accuracy} after 30 rounds, expected at least 0.9")
endif()

execute_process(COMMAND ${EDGESGD} train --data csv:${d}/train.csv
                        --test-data npy:${d}/t10k-x.npy,${d}/t10k-y.npy --limit 200 --rounds 100
                        --eval-every 100 --batch 16 --codec identity
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "train failed (${result}): ${err}")
endif()
if(NOT out MATCHES "\\(200 train / 60 test samples\\)")
  message(FATAL_ERROR "train did not read the first 200 training and 60 test samples:\n${out}")
endif()
message(STATUS "idx, idx.gz, csv, csv label last and npy: identical metrics, test accuracy ${accuracy}")
