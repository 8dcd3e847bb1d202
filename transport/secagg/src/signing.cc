#include "edgesgd/secagg/signing.h"

#include <mbedtls/sha256.h>

#include <string_view>

namespace edgesgd::secagg {
namespace {

// SHA-256 over a label and little-endian words, streamed (a survivor set can be long).
class Statement {
 public:
  explicit Statement(std::string_view label) {
    mbedtls_sha256_init(&context_);
    (void)mbedtls_sha256_starts_ret(&context_, 0);
    Add({reinterpret_cast<const std::byte*>(label.data()), label.size()});
  }
  ~Statement() { mbedtls_sha256_free(&context_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void Add(std::span<const std::byte> bytes) {
    (void)mbedtls_sha256_update_ret(&context_, reinterpret_cast<const unsigned char*>(bytes.data()),
                                    bytes.size());
  }
  void AddWord(std::uint64_t value, std::size_t bytes) {
    std::array<std::byte, 8> encoded{};
    for (std::size_t i = 0; i < bytes; ++i) {
      encoded[i] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
    }
    Add(std::span(encoded).first(bytes));
  }
  Digest Finish() {
    Digest digest;
    (void)mbedtls_sha256_finish_ret(&context_, reinterpret_cast<unsigned char*>(digest.data()));
    return digest;
  }

 private:
  mbedtls_sha256_context context_;
};

}  // namespace

Digest KeysStatement(std::uint64_t round, std::uint32_t device, const KeyAdvertisement& keys) {
  Statement statement("edgesgd secure aggregation keys");
  statement.AddWord(round, 8);
  statement.AddWord(device, 4);
  statement.Add(keys.cipher_public);
  statement.Add(keys.mask_public);
  return statement.Finish();
}

Digest SurvivorsStatement(std::uint64_t round, std::span<const std::uint32_t> survivors) {
  Statement statement("edgesgd secure aggregation survivors");
  statement.AddWord(round, 8);
  statement.AddWord(survivors.size(), 4);
  for (const std::uint32_t id : survivors) statement.AddWord(id, 4);
  return statement.Finish();
}

bool StrictlyIncreasing(std::span<const std::uint32_t> ids) {
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i - 1] >= ids[i]) return false;
  }
  return true;
}

}  // namespace edgesgd::secagg
