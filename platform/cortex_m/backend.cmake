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
