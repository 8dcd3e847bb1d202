#pragma once

// What every fuzz target shares, whatever layer it drives: the invariant check and a reader that
// turns the fuzzer's bytes into values (zeros once they run out), with its writing side for
// seed generators. Header-only, no GoogleTest: the targets are libFuzzer programs.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

// Stops the run with a message when an invariant does not hold: libFuzzer reports the trap as a
// crash and saves the input that caused it.
#define EDGESGD_FUZZ_CHECK(condition, what)                                                \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      std::fprintf(stderr, "fuzz invariant violated: %s\n  check: %s\n  at %s:%d\n", what, \
                   #condition, __FILE__, __LINE__);                                        \
      std::fflush(stderr);                                                                 \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (false)

namespace edgesgd::fuzz {

// Reads little-endian values off the front of the fuzzer's input; past the end every value is 0
// and every byte string empty, so a harness never has to check lengths.
class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  explicit FuzzInput(std::span<const std::byte> bytes)
      : data_(reinterpret_cast<const std::uint8_t*>(bytes.data())), size_(bytes.size()) {}

  bool empty() const { return at_ >= size_; }
  std::size_t remaining() const { return at_ < size_ ? size_ - at_ : 0; }

  std::uint8_t U8() { return static_cast<std::uint8_t>(Read(1)); }
  std::uint16_t U16() { return static_cast<std::uint16_t>(Read(2)); }
  std::uint32_t U32() { return static_cast<std::uint32_t>(Read(4)); }
  std::uint64_t U64() { return Read(8); }
  float F32() {
    const std::uint32_t bits = U32();
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  // Up to `count` bytes (fewer at the end of the input).
  std::span<const std::byte> Bytes(std::size_t count) {
    if (count > remaining()) count = remaining();
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data_ + at_), count);
    at_ += count;
    return bytes;
  }
  std::span<const std::byte> Rest() { return Bytes(remaining()); }

 private:
  std::uint64_t Read(std::size_t bytes) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes && at_ < size_; ++i, ++at_) {
      value |= std::uint64_t{data_[at_]} << (8 * i);
    }
    return value;
  }

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// The writing side of FuzzInput, for the corpus generator: the same encoding.
class FuzzOutput {
 public:
  void U8(std::uint8_t value) { Put(value, 1); }
  void U16(std::uint16_t value) { Put(value, 2); }
  void U32(std::uint32_t value) { Put(value, 4); }
  void U64(std::uint64_t value) { Put(value, 8); }
  void F32(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    U32(bits);
  }
  void Bytes(std::span<const std::byte> bytes) {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  void Put(std::uint64_t value, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      bytes_.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
    }
  }
  std::vector<std::byte> bytes_;
};

}  // namespace edgesgd::fuzz
