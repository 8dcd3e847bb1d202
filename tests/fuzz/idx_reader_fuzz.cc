// Fuzz target: the IDX reader (--data idx:IMAGES,LABELS) on any images and labels files, laid out
// as data_file_fuzz.h's FuzzFilePair reads them; its invariants are that header's.

#include <cstddef>
#include <cstdint>

#include "fuzz/data_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzFilePair("idx", data, size);
  return 0;
}
