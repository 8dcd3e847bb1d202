#include "edgesgd/auth/hmac_sha256.h"

// constant_time.h, unlike the other headers, lacks the C++ linkage guard.
extern "C" {
#include <mbedtls/constant_time.h>
}
#include <mbedtls/md.h>
#include <mbedtls/platform.h>
#include <mbedtls/platform_util.h>

#include <utility>

namespace edgesgd::auth {
namespace {
const unsigned char* Bytes(std::span<const std::byte> span) {
  return reinterpret_cast<const unsigned char*>(span.data());
}
}  // namespace

HmacSha256::HmacSha256() = default;

HmacSha256::~HmacSha256() {
  if (context_ != nullptr) {
    mbedtls_md_free(context_);  // zeroizes the key pads and hash state before freeing them
    mbedtls_free(context_);
  }
}

HmacSha256::HmacSha256(HmacSha256&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      keyed_(std::exchange(other.keyed_, false)) {}

HmacSha256& HmacSha256::operator=(HmacSha256&& other) noexcept {
  if (this != &other) {
    std::swap(context_, other.context_);
    std::swap(keyed_, other.keyed_);
  }
  return *this;
}

Status HmacSha256::Init() {
  if (context_ != nullptr) return Status::FailedPrecondition("Init was already called");
  const mbedtls_md_info_t* info = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  if (info == nullptr) return Status::Internal("mbed TLS lacks SHA-256");
  auto* context =
      static_cast<mbedtls_md_context_t*>(mbedtls_calloc(1, sizeof(mbedtls_md_context_t)));
  if (context == nullptr) return Status::ResourceExhausted("cannot allocate the HMAC state");
  mbedtls_md_init(context);
  const int result = mbedtls_md_setup(context, info, /*hmac=*/1);
  if (result != 0) {
    mbedtls_md_free(context);
    mbedtls_free(context);
    return result == MBEDTLS_ERR_MD_ALLOC_FAILED
               ? Status::ResourceExhausted("mbed TLS cannot allocate the HMAC pads")
               : Status::Internal("mbed TLS cannot set up HMAC-SHA256");
  }
  context_ = context;
  return Status::Ok();
}

bool HmacSha256::initialized() const { return context_ != nullptr; }

Status HmacSha256::SetKey(std::span<const std::byte> key) {
  if (context_ == nullptr) return Status::FailedPrecondition("Init has not been called");
  keyed_ = false;
  if (mbedtls_md_hmac_starts(context_, Bytes(key), key.size()) != 0) {
    return Status::Internal("mbed TLS cannot set the HMAC key");
  }
  keyed_ = true;
  return Status::Ok();
}

Status HmacSha256::Mac(std::initializer_list<std::span<const std::byte>> parts,
                       std::span<std::byte, kTagBytes> tag) {
  if (context_ == nullptr || !keyed_) {
    return Status::FailedPrecondition("Init or SetKey has not been called");
  }
  // reset() restarts from the key's stored inner pad: no key processing per message.
  if (mbedtls_md_hmac_reset(context_) != 0) {
    return Status::Internal("mbed TLS cannot reset the HMAC");
  }
  for (const std::span<const std::byte> part : parts) {
    if (mbedtls_md_hmac_update(context_, Bytes(part), part.size()) != 0) {
      return Status::Internal("mbed TLS cannot hash a message part");
    }
  }
  if (mbedtls_md_hmac_finish(context_, reinterpret_cast<unsigned char*>(tag.data())) != 0) {
    return Status::Internal("mbed TLS cannot finish the HMAC");
  }
  return Status::Ok();
}

bool TagsEqual(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) return false;
  return mbedtls_ct_memcmp(a.data(), b.data(), a.size()) == 0;
}

void Zeroize(std::span<std::byte> bytes) { mbedtls_platform_zeroize(bytes.data(), bytes.size()); }

}  // namespace edgesgd::auth
