// `edgesgd keygen`: writes a key file of fresh pre-shared device keys, readable by its owner
// only, in the format `--keys` loads (edgesgd/auth/key_file.h); with --per-device-dir, each
// device's line alone in a file of its own too. With --signing-keys and --verifying-keys, also
// each device's ECDSA P-256 key pair for signed secure aggregation (cli/signing_keys.h).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/run_flags.h"
#include "cli/signing_keys.h"
#include "edgesgd/auth/key_file.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/platform/random_bytes.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/secagg/ecdsa.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kKeygen = "keygen";
// A node loads at most this many keys (one per worker a server admits).
constexpr std::uint32_t kMaxDevices = protocol::kMaxWorkers;

struct KeygenFlags {
  std::uint32_t devices = 0;
  std::string out;
  std::string per_device_dir;  // empty: no per-device files
  std::string signing_keys;    // empty: no signing keys
  std::string verifying_keys;
  bool force = false;
};

// Overwrites `text` before it is freed: it holds every key.
void Zeroize(std::string& text) {
  volatile char* bytes = text.data();
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = 0;
}

// The key file's text for devices 1..devices: a comment line, then one line per device in id
// order. An empty string when the system has no random source.
std::string NewKeyFile(std::uint32_t devices) {
  std::string text = "# edgesgd keys: device id, 64 hex digits (32 random bytes). Keep secret.\n";
  std::array<std::byte, 32> key{};
  for (std::uint32_t id = 1; id <= devices; ++id) {
    if (!platform::FillRandomBytes(key).ok()) {
      Zeroize(text);
      return {};
    }
    text += std::to_string(id);
    text += ' ';
    for (const std::byte b : key) {
      static constexpr char kHex[] = "0123456789abcdef";
      text += kHex[std::to_integer<unsigned>(b) >> 4];
      text += kHex[std::to_integer<unsigned>(b) & 0xF];
    }
    text += '\n';
  }
  std::memset(key.data(), 0, key.size());
  return text;
}

// Writes `text` to `path` with `mode` (0600 for secrets): into a new temporary file beside it,
// synced, then renamed over `path`, so a reader never sees half a file and secret keys never
// exist with wider permissions.
HostResult<> WriteFile(const std::string& path, std::string_view text, mode_t mode = 0600) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return HostError(Status::Unavailable(),
                     "cannot create " + temporary + ": " + std::strerror(errno));
  }
  std::size_t written = 0;
  bool ok = ::fchmod(fd, mode) == 0;  // whatever the umask
  while (ok && written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) written += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(temporary.c_str(), path.c_str()) == 0) return {};
  const std::string why = std::strerror(ok ? errno : saved);
  ::unlink(temporary.c_str());
  return HostError(Status::Unavailable(), "cannot write " + path + ": " + why);
}

// The file of device `id` alone under --per-device-dir: its pre-shared key, or its signing key.
std::string DeviceKeyPath(const KeygenFlags& flags, std::uint32_t id,
                          const char* extension = ".key") {
  return flags.per_device_dir + "/device-" + std::to_string(id) + extension;
}

// Fresh ECDSA key pairs for devices 1..devices: the signing keys as a key file (the format of
// --keys) and the verifying keys as a verifying-key file. False when the system has no random
// source or mbed TLS fails.
bool NewSigningKeys(std::uint32_t devices, std::string& signing, std::string& verifying) {
  signing = "# edgesgd signing keys: device id, 64 hex digits (ECDSA P-256). Keep secret.\n";
  verifying =
      "# edgesgd verifying keys: device id, 130 hex digits (uncompressed P-256 point). Public.\n";
  secagg::Key seed{};
  if (!platform::FillRandomBytes(seed).ok()) return false;
  secagg::SecretRandom random(seed);
  secagg::Wipe(seed);
  for (std::uint32_t id = 1; id <= devices; ++id) {
    secagg::SigningKey key;
    secagg::VerifyingKey public_key;
    if (!secagg::GenerateSigningKey(random, key, public_key).ok()) return false;
    signing += std::to_string(id) + ' ';
    for (const std::byte b : key) {
      static constexpr char kHex[] = "0123456789abcdef";
      signing += kHex[std::to_integer<unsigned>(b) >> 4];
      signing += kHex[std::to_integer<unsigned>(b) & 0xF];
    }
    signing += '\n';
    secagg::Wipe(key);
    verifying += VerifyingKeyLine(id, public_key);
  }
  return true;
}

// False, after saying so, when `path` exists and --force was not given.
HostResult<> MayReplace(const KeygenFlags& flags, const std::string& path) {
  struct stat existing {};
  if (flags.force || ::stat(path.c_str(), &existing) != 0) return {};
  return HostError(
      Status::AlreadyExists(),
      path + " exists; pass --force to replace it (its devices then need the new keys)");
}

// Writes each device's line of `text` (a key file) alone to its file under --per-device-dir,
// named device-ID`extension`, creating the directory (mode 0700) if it is missing.
HostResult<> WritePerDeviceFiles(const KeygenFlags& flags, std::string_view text,
                                 const char* extension) {
  if (::mkdir(flags.per_device_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return HostError(Status::Unavailable(), "cannot create directory " + flags.per_device_dir +
                                                ": " + std::strerror(errno));
  }
  text.remove_prefix(text.find('\n') + 1);  // the comment line
  for (std::uint32_t id = 1; !text.empty(); ++id) {
    const std::size_t line_end = text.find('\n') + 1;
    EDGESGD_HOST_TRY(WriteFile(DeviceKeyPath(flags, id, extension), text.substr(0, line_end)));
    text.remove_prefix(line_end);
  }
  return {};
}

// --signing-keys and --verifying-keys: the signing keys (and each device's alone under
// --per-device-dir), checked with the loaders the nodes use, and the public verifying keys.
HostResult<> WriteSigningKeys(const KeygenFlags& flags) {
  std::string signing;
  std::string verifying;
  const bool generated = NewSigningKeys(flags.devices, signing, verifying);
  auth::FixedKeyRing<kMaxDevices> ring;
  HostResult<> written;
  if (!generated) {
    written = HostError(Status::Unavailable(), "cannot generate signing keys (random source)");
  } else if (const HostResult<std::size_t> check =
                 auth::ParseKeyFile(signing, flags.signing_keys, ring);
             !check.ok()) {
    written = HostError(Status::Internal(), "generated signing keys do not load: " +
                                                check.message());
  } else if (const auto keys = ParseVerifyingKeys(verifying, flags.verifying_keys); !keys.ok()) {
    written = HostError(Status::Internal(), "generated verifying keys do not load: " +
                                                keys.message());
  }
  if (written.ok() && !flags.per_device_dir.empty()) {
    written = WritePerDeviceFiles(flags, signing, ".signing");
  }
  if (written.ok()) written = WriteFile(flags.verifying_keys, verifying, 0644);
  if (written.ok()) written = WriteFile(flags.signing_keys, signing);
  Zeroize(signing);
  return written;
}

int RunKeygen(const KeygenFlags& flags) {
  const bool per_device = !flags.per_device_dir.empty();
  const bool signing = !flags.signing_keys.empty();
  HostResult<> replaceable = MayReplace(flags, flags.out);
  for (std::uint32_t id = 1; replaceable.ok() && per_device && id <= flags.devices; ++id) {
    replaceable = MayReplace(flags, DeviceKeyPath(flags, id));
    if (replaceable.ok() && signing) {
      replaceable = MayReplace(flags, DeviceKeyPath(flags, id, ".signing"));
    }
  }
  if (replaceable.ok() && signing) replaceable = MayReplace(flags, flags.signing_keys);
  if (replaceable.ok() && signing) replaceable = MayReplace(flags, flags.verifying_keys);
  if (!replaceable.ok()) return Fail(kKeygen, replaceable.message(), 1);
  std::string text = NewKeyFile(flags.devices);
  if (text.empty()) {
    std::fprintf(stderr, "edgesgd %s: the system's random source failed\n", kKeygen);
    return 1;
  }
  // The file must load as written: check it with the loader every node uses.
  auth::FixedKeyRing<kMaxDevices> ring;
  const HostResult<std::size_t> check = auth::ParseKeyFile(text, flags.out, ring);
  HostResult<> written;
  if (check.ok() && *check != flags.devices) {
    written =
        HostError(Status::Internal(), "the generated key file holds " + std::to_string(*check) +
                                          " keys, not " + std::to_string(flags.devices));
  }
  // The shared file last: once it exists, so does every device's own.
  if (check.ok() && written.ok() && per_device) {
    written = WritePerDeviceFiles(flags, text, ".key");
  }
  if (check.ok() && written.ok()) written = WriteFile(flags.out, text);
  Zeroize(text);
  if (!check.ok()) {
    std::fprintf(stderr, "edgesgd %s: generated keys do not load: %s\n", kKeygen,
                 check.message().c_str());
    return 1;
  }
  if (written.ok() && signing) written = WriteSigningKeys(flags);
  if (!written.ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", kKeygen, written.message().c_str());
    return 1;
  }
  std::string files = flags.out;
  if (per_device) files += " and each alone to " + flags.per_device_dir + "/device-ID.key";
  std::fprintf(stderr, "edgesgd %s: wrote %u keys (devices 1..%u) to %s, mode 0600\n", kKeygen,
               flags.devices, flags.devices, files.c_str());
  if (signing) {
    std::string signing_files = flags.signing_keys;
    if (per_device) {
      signing_files += " and each alone to " + flags.per_device_dir + "/device-ID.signing";
    }
    std::fprintf(stderr,
                 "edgesgd %s: wrote their ECDSA P-256 signing keys to %s (mode 0600) and "
                 "verifying keys to %s (mode 0644)\n",
                 kKeygen, signing_files.c_str(), flags.verifying_keys.c_str());
  }
  return 0;
}

}  // namespace

void AddKeygenCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<KeygenFlags>();
  CLI::App* command = app.add_subcommand(
      kKeygen,
      "Write a key file of fresh 32-byte pre-shared keys for devices 1..N, readable by its "
      "owner only.\nGive the whole file to the server (and to every gossip peer); a worker or "
      "bridge needs only its own line: give it the whole file, or its file of "
      "--per-device-dir. Use either with --keys FILE.");
  command->add_option("--devices", flags->devices, "Number of devices: ids 1..N get a key")
      ->required()
      ->check(CLI::Range(1u, kMaxDevices));
  command->add_option("--out", flags->out, "The key file to write (mode 0600)")->required();
  command->add_option("--per-device-dir", flags->per_device_dir,
                      "Also write each device's line alone to DIR/device-ID.key (mode 0600; DIR "
                      "is created if missing, mode 0700); FILE is still written, for the server");
  CLI::Option* signing_keys = command->add_option(
      "--signing-keys", flags->signing_keys,
      "Also write each device's ECDSA P-256 signing key for signed secure aggregation "
      "(--secagg-signed) to FILE (mode 0600; with --per-device-dir, each alone to "
      "DIR/device-ID.signing too): a worker's --secagg-signing-key");
  CLI::Option* verifying_keys = command->add_option(
      "--verifying-keys", flags->verifying_keys,
      "... and their verifying keys to FILE (public, mode 0644): the server's and every "
      "worker's --secagg-verifying-keys");
  signing_keys->needs(verifying_keys);
  verifying_keys->needs(signing_keys);
  command->add_flag("--force", flags->force,
                    "Replace FILE (and the per-device files) if they exist");
  command->callback([flags, &exit_code] { exit_code = RunKeygen(*flags); });
}

}  // namespace edgesgd::cli
