// Fuzz target: the CSV reader (--data csv:PATH) on any text, laid out as data_file_fuzz.h's
// FuzzOneFile reads it; its invariants are that header's.

#include <cstddef>
#include <cstdint>

#include "fuzz/data_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzOneFile("csv", data, size);
  return 0;
}
