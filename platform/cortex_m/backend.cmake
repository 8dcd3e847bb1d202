# Build settings of the cortex_m backend, included by platform/CMakeLists.txt on bare metal.
# Every image that links edgesgd::platform gets the backend's startup code in place of crt0
# (-nostartfiles) and a board linker script, so an application only writes main().

set(EDGESGD_CORTEX_M_LINKER_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/mps2_an386.ld CACHE FILEPATH
    "Linker script for Cortex-M images (memory map of the board; see mps2_an386.ld)")
set(EDGESGD_CORTEX_M_CORE_HZ 25000000 CACHE STRING
    "Cortex-M core clock in Hz: the rate of the DWT cycle counter behind MonotonicNanos")

target_compile_definitions(edgesgd_platform PRIVATE
  EDGESGD_CORTEX_M_CORE_HZ=${EDGESGD_CORTEX_M_CORE_HZ})
get_filename_component(linker_script_name ${EDGESGD_CORTEX_M_LINKER_SCRIPT} NAME)
set(installed_linker_script ${CMAKE_INSTALL_LIBDIR}/edgesgd/${linker_script_name})
target_link_options(edgesgd_platform INTERFACE
  -nostartfiles
  $<BUILD_INTERFACE:-T${EDGESGD_CORTEX_M_LINKER_SCRIPT}>
  $<INSTALL_INTERFACE:-T$<INSTALL_PREFIX>/${installed_linker_script}>)
install(FILES ${EDGESGD_CORTEX_M_LINKER_SCRIPT} DESTINATION ${CMAKE_INSTALL_LIBDIR}/edgesgd)

# Flash and RAM use after every link of an image.
find_program(EDGESGD_ARM_SIZE arm-none-eabi-size)

# edgesgd_mcu_image(NAME SOURCES... LIBRARIES...): an image (NAME.elf) linked with the backend
# (startup, semihosting log, memory figures), with a map file beside it and its flash and RAM use
# printed after every link: the figure to watch as the libraries grow.
function(edgesgd_mcu_image name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES} edgesgd::platform)
  # The backend's internal headers (semihosting, memory_usage) are for images like these.
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  edgesgd_embedded_target(${name})
  set_target_properties(${name} PROPERTIES SUFFIX .elf
                                           LINK_DEPENDS ${EDGESGD_CORTEX_M_LINKER_SCRIPT})
  target_link_options(${name} PRIVATE -Wl,-Map=$<TARGET_FILE_DIR:${name}>/${name}.map)
  if(EDGESGD_ARM_SIZE)
    add_custom_command(TARGET ${name} POST_BUILD
                       COMMAND ${EDGESGD_ARM_SIZE} $<TARGET_FILE:${name}> VERBATIM)
  endif()
endfunction()
