# libFuzzer targets (tests/fuzz), built in Clang sanitizer builds (the asan preset). The
# libraries they drive are then compiled with libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link, tests/fuzz/CMakeLists.txt) so the fuzzer sees their edges, not only
# its harness's; the targets link libFuzzer (-fsanitize=fuzzer). Other compilers and unsanitized
# builds have no fuzz targets.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND EDGESGD_SANITIZE AND EDGESGD_BUILD_TESTS
   AND NOT CMAKE_CROSSCOMPILING)
  set(EDGESGD_FUZZ_DEFAULT ON)
else()
  set(EDGESGD_FUZZ_DEFAULT OFF)
endif()
option(EDGESGD_FUZZ "Build the libFuzzer targets of tests/fuzz (Clang with EDGESGD_SANITIZE)"
       ${EDGESGD_FUZZ_DEFAULT})
if(EDGESGD_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "EDGESGD_FUZZ needs Clang (libFuzzer); this is ${CMAKE_CXX_COMPILER_ID}")
endif()
