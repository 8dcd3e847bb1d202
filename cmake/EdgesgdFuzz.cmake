# libFuzzer targets (tests/fuzz), built in Clang sanitizer builds (the asan preset): every
# target is then compiled with libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link),
# so the fuzzer sees the edges of the libraries it drives, not only those of its harness; the
# fuzz targets themselves link libFuzzer (-fsanitize=fuzzer). Other compilers and unsanitized
# builds have no fuzz targets.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND EDGESGD_SANITIZE AND EDGESGD_BUILD_TESTS
   AND NOT CMAKE_CROSSCOMPILING)
  set(EDGESGD_FUZZ_DEFAULT ON)
else()
  set(EDGESGD_FUZZ_DEFAULT OFF)
endif()
option(EDGESGD_FUZZ "Build the libFuzzer targets of tests/fuzz (Clang with EDGESGD_SANITIZE)"
       ${EDGESGD_FUZZ_DEFAULT})
if(EDGESGD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EDGESGD_FUZZ needs Clang (libFuzzer); this is ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
