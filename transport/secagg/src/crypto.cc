#include "edgesgd/secagg/crypto.h"

extern "C" {
#include <mbedtls/constant_time.h>
}
#include <mbedtls/bignum.h>
#include <mbedtls/chacha20.h>
#include <mbedtls/chachapoly.h>
#include <mbedtls/ecp.h>
#include <mbedtls/hkdf.h>
#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>

#include <algorithm>
#include <string_view>

namespace edgesgd::secagg {
namespace {

unsigned char* Bytes(std::span<std::byte> span) {
  return reinterpret_cast<unsigned char*>(span.data());
}
const unsigned char* Bytes(std::span<const std::byte> span) {
  return reinterpret_cast<const unsigned char*>(span.data());
}

constexpr std::array<unsigned char, 12> kZeroNonce{};

// mbed TLS's random-callback shape over a SecretRandom (used for the ladder's blinding).
int FillFromSecretRandom(void* random, unsigned char* out, std::size_t length) {
  static_cast<SecretRandom*>(random)->Fill({reinterpret_cast<std::byte*>(out), length});
  return 0;
}

// The Curve25519 group and the bignums of one scalar multiplication, freed on every path.
class Curve25519 {
 public:
  Curve25519() {
    mbedtls_ecp_group_init(&group_);
    mbedtls_ecp_point_init(&point_);
    mbedtls_ecp_point_init(&result_);
    mbedtls_mpi_init(&scalar_);
  }
  ~Curve25519() {
    mbedtls_mpi_free(&scalar_);  // mbed TLS zeroizes bignums as it frees them
    mbedtls_ecp_point_free(&result_);
    mbedtls_ecp_point_free(&point_);
    mbedtls_ecp_group_free(&group_);
  }
  Curve25519(const Curve25519&) = delete;
  Curve25519& operator=(const Curve25519&) = delete;

  // result = X25519(scalar, u); `u` null means the base point. Returns mbed TLS's code.
  int Multiply(const Key& private_key, const Key* u, Key& out) {
    int code = mbedtls_ecp_group_load(&group_, MBEDTLS_ECP_DP_CURVE25519);
    if (code != 0) return code;
    Key clamped = private_key;  // RFC 7748 section 5's decodeScalar25519
    clamped[0] &= std::byte{248};
    clamped[31] &= std::byte{127};
    clamped[31] |= std::byte{64};
    code =
        mbedtls_mpi_read_binary_le(&scalar_, Bytes(std::span<const std::byte>(clamped)), kKeyBytes);
    Wipe(clamped);
    if (code != 0) return code;
    const mbedtls_ecp_point* base = &group_.G;
    if (u != nullptr) {
      Key masked = *u;  // decodeUCoordinate: the top bit is ignored
      masked[31] &= std::byte{127};
      code = mbedtls_mpi_read_binary_le(&point_.X, Bytes(std::span<const std::byte>(masked)),
                                        kKeyBytes);
      if (code == 0) code = mbedtls_mpi_lset(&point_.Z, 1);
      if (code != 0) return code;
      base = &point_;
    }
    // The ladder's projective coordinates are randomized (side-channel blinding) from a stream
    // keyed by the scalar: deterministic, and secret as long as the scalar is.
    SecretRandom blinding(Sha256(private_key));
    code = mbedtls_ecp_mul(&group_, &result_, &scalar_, base, FillFromSecretRandom, &blinding);
    if (code != 0) return code;
    return mbedtls_mpi_write_binary_le(&result_.X, Bytes(std::span<std::byte>(out)), kKeyBytes);
  }

 private:
  mbedtls_ecp_group group_;
  mbedtls_ecp_point point_;
  mbedtls_ecp_point result_;
  mbedtls_mpi scalar_;
};

Status FromMbedtls(int code, const char* what) {
  if (code == 0) return Status::Ok();
  if (code == MBEDTLS_ERR_MPI_ALLOC_FAILED || code == MBEDTLS_ERR_ECP_ALLOC_FAILED ||
      code == MBEDTLS_ERR_MD_ALLOC_FAILED) {
    return Status::ResourceExhausted("mbed TLS cannot allocate its key-agreement state");
  }
  return Status::Internal(what);
}

bool AllZero(std::span<const std::byte> bytes) {
  std::byte any{0};
  for (std::byte b : bytes) any |= b;
  return any == std::byte{0};
}

constexpr std::string_view kHkdfSalt = "edgesgd secure aggregation";

}  // namespace

SecretRandom::SecretRandom(const Key& key) : key_(key) {}

SecretRandom::~SecretRandom() {
  Wipe(key_);
  Wipe(block_);
}

void SecretRandom::Refill() {
  block_.fill(std::byte{0});
  // One 64-byte block per call: encrypting zeros yields the keystream itself.
  mbedtls_chacha20_crypt(Bytes(std::span<const std::byte>(key_)), kZeroNonce.data(), next_block_++,
                         block_.size(), Bytes(std::span<const std::byte>(block_)),
                         Bytes(std::span<std::byte>(block_)));
  used_ = 0;
}

void SecretRandom::Fill(std::span<std::byte> out) {
  while (!out.empty()) {
    if (used_ == block_.size()) Refill();
    const std::size_t take = std::min(out.size(), block_.size() - used_);
    std::copy_n(block_.begin() + static_cast<std::ptrdiff_t>(used_), take, out.begin());
    Wipe(std::span(block_).subspan(used_, take));
    used_ += take;
    out = out.subspan(take);
  }
}

std::uint32_t SecretRandom::NextWord() {
  std::array<std::byte, 4> bytes;
  Fill(bytes);
  return std::uint32_t{std::to_integer<std::uint8_t>(bytes[0])} |
         std::uint32_t{std::to_integer<std::uint8_t>(bytes[1])} << 8 |
         std::uint32_t{std::to_integer<std::uint8_t>(bytes[2])} << 16 |
         std::uint32_t{std::to_integer<std::uint8_t>(bytes[3])} << 24;
}

Status GenerateKeyPair(SecretRandom& random, KeyPair& out) {
  random.Fill(out.private_key);
  return PublicKeyOf(out.private_key, out.public_key);
}

Status PublicKeyOf(const Key& private_key, Key& public_key) {
  Curve25519 curve;
  return FromMbedtls(curve.Multiply(private_key, nullptr, public_key),
                     "mbed TLS cannot compute an X25519 public key");
}

Key PrivateKeyToSecret(const Key& private_key) {
  Key secret{};
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    const unsigned next = i + 1 < kKeyBytes ? std::to_integer<unsigned>(private_key[i + 1]) : 0;
    secret[i] = static_cast<std::byte>((std::to_integer<unsigned>(private_key[i]) >> 3) | (next << 5));
  }
  secret[kKeyBytes - 1] &= std::byte{0x07};  // key bits 254 (always set) and 255 (always clear)
  return secret;
}

Key PrivateKeyFromSecret(const Key& secret) {
  Key key{};
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    const unsigned previous = i > 0 ? std::to_integer<unsigned>(secret[i - 1]) : 0;
    key[i] = static_cast<std::byte>((std::to_integer<unsigned>(secret[i]) << 3) | (previous >> 5));
  }
  key[kKeyBytes - 1] &= std::byte{0x3F};
  key[kKeyBytes - 1] |= std::byte{0x40};
  return key;
}

Status AgreeSecret(const Key& private_key, const Key& peer_public, Key& shared) {
  Curve25519 curve;
  const int code = curve.Multiply(private_key, &peer_public, shared);
  if (code == MBEDTLS_ERR_ECP_INVALID_KEY) {
    return Status::InvalidArgument("the peer's X25519 public key is not acceptable");
  }
  EDGESGD_TRY(FromMbedtls(code, "mbed TLS cannot compute an X25519 shared secret"));
  if (AllZero(shared)) {
    return Status::InvalidArgument("the peer's X25519 public key has low order (all-zero secret)");
  }
  return Status::Ok();
}

Status DeriveKey(const Key& shared, std::span<const std::byte> label,
                 std::span<const std::byte> context, Key& out) {
  // info = label || context, assembled on the stack: labels and contexts are a few dozen bytes.
  std::array<std::byte, 128> info;
  if (label.size() + context.size() > info.size()) {
    return Status::InvalidArgument("key-derivation label and context exceed 128 bytes");
  }
  std::copy(label.begin(), label.end(), info.begin());
  std::copy(context.begin(), context.end(),
            info.begin() + static_cast<std::ptrdiff_t>(label.size()));
  const int code =
      mbedtls_hkdf(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256),
                   reinterpret_cast<const unsigned char*>(kHkdfSalt.data()), kHkdfSalt.size(),
                   Bytes(std::span<const std::byte>(shared)), shared.size(),
                   Bytes(std::span<const std::byte>(info)), label.size() + context.size(),
                   Bytes(std::span<std::byte>(out)), out.size());
  return FromMbedtls(code, "mbed TLS cannot derive a key with HKDF-SHA256");
}

void ApplyMask(const Key& seed, MaskSign sign, std::span<std::uint32_t> words) {
  mbedtls_chacha20_context context;
  mbedtls_chacha20_init(&context);
  mbedtls_chacha20_setkey(&context, Bytes(std::span<const std::byte>(seed)));
  mbedtls_chacha20_starts(&context, kZeroNonce.data(), 0);
  std::array<unsigned char, 256> stream;
  while (!words.empty()) {
    const std::size_t count = std::min(words.size(), stream.size() / 4);
    stream.fill(0);
    mbedtls_chacha20_update(&context, count * 4, stream.data(), stream.data());
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t mask =
          std::uint32_t{stream[4 * i]} | std::uint32_t{stream[4 * i + 1]} << 8 |
          std::uint32_t{stream[4 * i + 2]} << 16 | std::uint32_t{stream[4 * i + 3]} << 24;
      words[i] = sign == MaskSign::kAdd ? words[i] + mask : words[i] - mask;
    }
    words = words.subspan(count);
  }
  mbedtls_platform_zeroize(stream.data(), stream.size());
  mbedtls_chacha20_free(&context);  // zeroizes the key schedule
}

Status Seal(const Key& key, std::span<const std::byte> associated_data,
            std::span<const std::byte> plaintext, std::span<std::byte> sealed) {
  if (sealed.size() != plaintext.size() + kAeadTagBytes) {
    return Status::InvalidArgument("sealed buffer must be the plaintext plus a 16-byte tag");
  }
  mbedtls_chachapoly_context context;
  mbedtls_chachapoly_init(&context);
  int code = mbedtls_chachapoly_setkey(&context, Bytes(std::span<const std::byte>(key)));
  if (code == 0) {
    code = mbedtls_chachapoly_encrypt_and_tag(
        &context, plaintext.size(), kZeroNonce.data(), Bytes(associated_data),
        associated_data.size(), Bytes(plaintext), Bytes(sealed.first(plaintext.size())),
        Bytes(sealed.last(kAeadTagBytes)));
  }
  mbedtls_chachapoly_free(&context);
  return FromMbedtls(code, "mbed TLS cannot seal with ChaCha20-Poly1305");
}

Status Open(const Key& key, std::span<const std::byte> associated_data,
            std::span<const std::byte> sealed, std::span<std::byte> plaintext) {
  if (sealed.size() != plaintext.size() + kAeadTagBytes) {
    return Status::InvalidArgument("sealed message must be the plaintext plus a 16-byte tag");
  }
  mbedtls_chachapoly_context context;
  mbedtls_chachapoly_init(&context);
  int code = mbedtls_chachapoly_setkey(&context, Bytes(std::span<const std::byte>(key)));
  if (code == 0) {
    code = mbedtls_chachapoly_auth_decrypt(&context, plaintext.size(), kZeroNonce.data(),
                                           Bytes(associated_data), associated_data.size(),
                                           Bytes(sealed.last(kAeadTagBytes)),
                                           Bytes(sealed.first(plaintext.size())), Bytes(plaintext));
  }
  mbedtls_chachapoly_free(&context);
  if (code == MBEDTLS_ERR_CHACHAPOLY_AUTH_FAILED) {
    Wipe(plaintext);
    return Status::Unauthenticated("sealed shares failed authentication (tampered or replayed)");
  }
  return FromMbedtls(code, "mbed TLS cannot open ChaCha20-Poly1305");
}

Digest Sha256(std::span<const std::byte> bytes) {
  Digest digest;
  // mbedtls_sha256_ret cannot fail for SHA-256 with the software implementation.
  (void)mbedtls_sha256_ret(Bytes(bytes), bytes.size(), Bytes(std::span<std::byte>(digest)), 0);
  return digest;
}

bool SecretsEqual(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && mbedtls_ct_memcmp(a.data(), b.data(), a.size()) == 0;
}

void Wipe(std::span<std::byte> secret) { mbedtls_platform_zeroize(secret.data(), secret.size()); }

}  // namespace edgesgd::secagg
