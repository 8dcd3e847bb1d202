#pragma once

// The long-term ECDSA P-256 keys of signed secure aggregation (--secagg-signed) on the command
// line: `edgesgd keygen --signing-keys FILE --verifying-keys FILE` writes them; a worker loads
// its own signing key and everyone's verifying keys, the server the verifying keys.
//
// Signing keys use the key-file format of --keys (edgesgd/auth/key_file.h: `DEVICE_ID HEX`, 64
// hex digits, the file readable by its owner only). Verifying keys are public:
//   # edgesgd verifying keys: device id, 130 hex digits (uncompressed P-256 point)
//   1 04ab...  (130 hex digits)
// with the same rules for ids, blank lines and comments, any file permissions, and every key a
// point of the curve.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/platform/result.h"
#include "edgesgd/secagg/ecdsa.h"
#include "edgesgd/secagg/signing.h"

namespace edgesgd::cli {

// The verifying keys of the text of a verifying-key file, sorted by device; `name` prefixes
// messages ("verifying.txt:3: ..."). Errors: kDataLoss (syntax, or a point not on the curve),
// kAlreadyExists (a device twice), kInvalidArgument (no key at all).
HostResult<std::vector<secagg::DeviceVerifyingKey>> ParseVerifyingKeys(std::string_view text,
                                                                       std::string_view name);

// One line of a verifying-key file.
std::string VerifyingKeyLine(std::uint32_t device, const secagg::VerifyingKey& key);

// What a node holds to sign or check secure rounds. Not movable: the verifier views the ring.
struct SecureSigning {
  SecureSigning() = default;
  SecureSigning(const SecureSigning&) = delete;
  SecureSigning& operator=(const SecureSigning&) = delete;

  std::vector<secagg::DeviceVerifyingKey> ring;
  std::optional<secagg::EcdsaVerifier> verifier;
  std::optional<secagg::EcdsaSigner> signer;  // a worker's

  secagg::DeviceSigning device() const { return {&*signer, &*verifier}; }
};

// The server's: every verifying key of the file at `path`, which must name devices 1..workers.
// The message names `flag`.
HostResult<> LoadServerSigning(const std::string& path, std::uint32_t workers,
                               std::string_view flag, SecureSigning& out);

// A worker's: its own signing key from `signing_path` and every verifying key from
// `verifying_path`; its key must be the one the verifying file gives for `device`.
HostResult<> LoadWorkerSigning(const std::string& signing_path, const std::string& verifying_path,
                               std::uint32_t device, SecureSigning& out);

}  // namespace edgesgd::cli
