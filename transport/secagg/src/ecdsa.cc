#include "edgesgd/secagg/ecdsa.h"

#include <mbedtls/bignum.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/ecp.h>

#include <algorithm>

namespace edgesgd::secagg {
namespace {

constexpr std::size_t kScalarBytes = 32;

int FillFromSecretRandom(void* random, unsigned char* out, std::size_t length) {
  static_cast<SecretRandom*>(random)->Fill({reinterpret_cast<std::byte*>(out), length});
  return 0;
}

const unsigned char* Bytes(std::span<const std::byte> span) {
  return reinterpret_cast<const unsigned char*>(span.data());
}
unsigned char* Bytes(std::span<std::byte> span) {
  return reinterpret_cast<unsigned char*>(span.data());
}

Status FromMbedtls(int code, const char* what) {
  if (code == 0) return Status::Ok();
  if (code == MBEDTLS_ERR_MPI_ALLOC_FAILED || code == MBEDTLS_ERR_ECP_ALLOC_FAILED) {
    return Status::ResourceExhausted("mbed TLS cannot allocate its ECDSA state");
  }
  return Status::Internal(what);
}

// The P-256 group, a scalar, a point and a signature's two halves, freed (and zeroized) on every
// path.
class P256 {
 public:
  P256() {
    mbedtls_ecp_group_init(&group);
    mbedtls_ecp_point_init(&point);
    mbedtls_mpi_init(&scalar);
    mbedtls_mpi_init(&r);
    mbedtls_mpi_init(&s);
  }
  ~P256() {
    mbedtls_mpi_free(&s);
    mbedtls_mpi_free(&r);
    mbedtls_mpi_free(&scalar);
    mbedtls_ecp_point_free(&point);
    mbedtls_ecp_group_free(&group);
  }
  P256(const P256&) = delete;
  P256& operator=(const P256&) = delete;

  int Load() { return mbedtls_ecp_group_load(&group, MBEDTLS_ECP_DP_SECP256R1); }

  // point = scalar * G, written uncompressed.
  int PublicPoint(const SigningKey& key, VerifyingKey& out) {
    int code = mbedtls_mpi_read_binary(&scalar, Bytes(std::span<const std::byte>(key)), key.size());
    if (code == 0) code = mbedtls_ecp_check_privkey(&group, &scalar);
    if (code != 0) return code;
    // The multiplication's blinding comes from a stream keyed by the key's hash.
    SecretRandom blinding(Sha256(key));
    code = mbedtls_ecp_mul(&group, &point, &scalar, &group.G, FillFromSecretRandom, &blinding);
    if (code != 0) return code;
    std::size_t written = 0;
    return mbedtls_ecp_point_write_binary(&group, &point, MBEDTLS_ECP_PF_UNCOMPRESSED, &written,
                                          Bytes(std::span<std::byte>(out)), out.size());
  }

  int ReadPoint(const VerifyingKey& key) {
    const int code = mbedtls_ecp_point_read_binary(
        &group, &point, Bytes(std::span<const std::byte>(key)), key.size());
    return code != 0 ? code : mbedtls_ecp_check_pubkey(&group, &point);
  }

  mbedtls_ecp_group group;
  mbedtls_ecp_point point;
  mbedtls_mpi scalar;
  mbedtls_mpi r;
  mbedtls_mpi s;
};

}  // namespace

Status GenerateSigningKey(SecretRandom& random, SigningKey& signing, VerifyingKey& verifying) {
  P256 curve;
  int code = curve.Load();
  if (code == 0)
    code = mbedtls_ecp_gen_privkey(&curve.group, &curve.scalar, FillFromSecretRandom, &random);
  if (code == 0) {
    code = mbedtls_mpi_write_binary(&curve.scalar, Bytes(std::span<std::byte>(signing)),
                                    signing.size());
  }
  EDGESGD_TRY(FromMbedtls(code, "mbed TLS cannot draw a P-256 signing key"));
  return VerifyingKeyOf(signing, verifying);
}

Status VerifyingKeyOf(const SigningKey& signing, VerifyingKey& verifying) {
  P256 curve;
  int code = curve.Load();
  if (code == 0) code = curve.PublicPoint(signing, verifying);
  if (code == MBEDTLS_ERR_ECP_INVALID_KEY) {
    return Status::InvalidArgument("the signing key is not a P-256 scalar in [1, n - 1]");
  }
  return FromMbedtls(code, "mbed TLS cannot compute a P-256 verifying key");
}

Status CheckVerifyingKey(const VerifyingKey& key) {
  P256 curve;
  int code = curve.Load();
  if (code == 0) code = curve.ReadPoint(key);
  if (code == MBEDTLS_ERR_ECP_INVALID_KEY || code == MBEDTLS_ERR_ECP_BAD_INPUT_DATA ||
      code == MBEDTLS_ERR_ECP_FEATURE_UNAVAILABLE) {
    return Status::InvalidArgument("the verifying key is not an uncompressed P-256 point");
  }
  return FromMbedtls(code, "mbed TLS cannot read a P-256 verifying key");
}

Status EcdsaSigner::Sign(const Digest& statement, Signature& signature) const {
  P256 curve;
  int code = curve.Load();
  if (code == 0) {
    code = mbedtls_mpi_read_binary(&curve.scalar, Bytes(std::span<const std::byte>(key_)),
                                   key_.size());
  }
  if (code == 0) code = mbedtls_ecp_check_privkey(&curve.group, &curve.scalar);
  if (code == 0) {
    // RFC 6979's nonce; the blinding of the arithmetic from a stream keyed by key and statement.
    std::array<std::byte, 2 * kKeyBytes> material;
    std::copy(key_.begin(), key_.end(), material.begin());
    std::copy(statement.begin(), statement.end(), material.begin() + kKeyBytes);
    SecretRandom blinding(Sha256(material));
    Wipe(material);
    code =
        mbedtls_ecdsa_sign_det_ext(&curve.group, &curve.r, &curve.s, &curve.scalar,
                                   Bytes(std::span<const std::byte>(statement)), statement.size(),
                                   MBEDTLS_MD_SHA256, FillFromSecretRandom, &blinding);
  }
  if (code == 0) {
    code = mbedtls_mpi_write_binary(&curve.r, Bytes(std::span(signature).first(kScalarBytes)),
                                    kScalarBytes);
  }
  if (code == 0) {
    code = mbedtls_mpi_write_binary(&curve.s, Bytes(std::span(signature).last(kScalarBytes)),
                                    kScalarBytes);
  }
  return FromMbedtls(code, "mbed TLS cannot sign with ECDSA P-256");
}

Status EcdsaVerifier::CheckRing(std::span<const DeviceVerifyingKey> ring) {
  for (std::size_t i = 1; i < ring.size(); ++i) {
    if (ring[i - 1].device >= ring[i].device) {
      return Status::InvalidArgument("the verifying keys are not in increasing device order");
    }
  }
  return Status::Ok();
}

Status EcdsaVerifier::Verify(std::uint32_t signer, const Digest& statement,
                             const Signature& signature) const {
  const auto found = std::lower_bound(
      ring_.begin(), ring_.end(), signer,
      [](const DeviceVerifyingKey& entry, std::uint32_t device) { return entry.device < device; });
  if (found == ring_.end() || found->device != signer) {
    return Status::NotFound("no verifying key for the signing device");
  }
  P256 curve;
  int code = curve.Load();
  if (code == 0) code = curve.ReadPoint(found->key);
  if (code == 0) {
    code = mbedtls_mpi_read_binary(&curve.r, Bytes(std::span(signature).first(kScalarBytes)),
                                   kScalarBytes);
  }
  if (code == 0) {
    code = mbedtls_mpi_read_binary(&curve.s, Bytes(std::span(signature).last(kScalarBytes)),
                                   kScalarBytes);
  }
  if (code == 0) {
    code = mbedtls_ecdsa_verify(&curve.group, Bytes(std::span<const std::byte>(statement)),
                                statement.size(), &curve.point, &curve.r, &curve.s);
  }
  if (code == MBEDTLS_ERR_ECP_VERIFY_FAILED || code == MBEDTLS_ERR_ECP_INVALID_KEY ||
      code == MBEDTLS_ERR_ECP_BAD_INPUT_DATA) {
    return Status::Unauthenticated("the signature does not verify under the device's key");
  }
  return FromMbedtls(code, "mbed TLS cannot verify an ECDSA P-256 signature");
}

}  // namespace edgesgd::secagg
