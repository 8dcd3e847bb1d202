# `keygen --per-device-dir`: beside the shared file, a file per device holding that device's line
# of it alone, readable by its owner only, in a directory created for them; a second run without
# --force refuses to replace a device's file.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P keygen_per_device.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(devices_dir ${WORK_DIR}/devices)

# The permission bits of `path`, in octal (600).
function(mode_of path out)
  execute_process(COMMAND stat -c %a ${path} OUTPUT_VARIABLE mode
                  OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  set(${out} ${mode} PARENT_SCOPE)
endfunction()

execute_process(COMMAND ${EDGESGD} keygen --devices 3 --out ${WORK_DIR}/keys
                        --per-device-dir ${devices_dir}
                RESULT_VARIABLE result ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "keygen --per-device-dir failed (${result}): ${err}")
endif()
mode_of(${devices_dir} mode)
if(NOT mode STREQUAL "700")
  message(FATAL_ERROR "${devices_dir} has mode ${mode}, not 700")
endif()
file(STRINGS ${WORK_DIR}/keys shared REGEX "^[0-9]")
foreach(id 1 2 3)
  set(device_file ${devices_dir}/device-${id}.key)
  if(NOT EXISTS ${device_file})
    message(FATAL_ERROR "keygen wrote no ${device_file}")
  endif()
  mode_of(${device_file} mode)
  file(READ ${device_file} text)
  math(EXPR index "${id} - 1")
  list(GET shared ${index} line)
  if(NOT mode STREQUAL "600" OR NOT text STREQUAL "${line}\n" OR NOT line MATCHES "^${id} ")
    message(FATAL_ERROR "${device_file} (mode ${mode}) holds '${text}', not device ${id}'s line "
                        "of the shared file alone with mode 600")
  endif()
endforeach()
if(EXISTS ${devices_dir}/device-4.key)
  message(FATAL_ERROR "keygen --devices 3 wrote a file for device 4")
endif()

file(REMOVE ${WORK_DIR}/keys)
execute_process(COMMAND ${EDGESGD} keygen --devices 3 --out ${WORK_DIR}/keys
                        --per-device-dir ${devices_dir}
                RESULT_VARIABLE result ERROR_VARIABLE err)
if(result EQUAL 0 OR EXISTS ${WORK_DIR}/keys
   OR NOT err MATCHES "device-1.key exists; pass --force")
  message(FATAL_ERROR "keygen replaced the device files without --force (${result}): ${err}")
endif()
message(STATUS "3 device files of one line each, mode 600; not replaced without --force")
