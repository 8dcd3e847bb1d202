#include "cli/signing_keys.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "edgesgd/auth/key_file.h"
#include "edgesgd/auth/key_ring.h"

namespace edgesgd::cli {
namespace {

bool ParseDeviceId(std::string_view field, std::uint32_t& out) {
  if (field.empty() || field.size() > 10) return false;
  std::uint64_t value = 0;
  for (const char c : field) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value == 0 || value >= 0xFFFFFFFFull) return false;
  out = static_cast<std::uint32_t>(value);
  return true;
}

std::string_view Trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

HostResult<std::string> ReadPublicFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return HostError(errno == ENOENT ? Status::NotFound() : Status::Unavailable(),
                     "cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << file.rdbuf();
  if (!file.good() && !file.eof()) {
    return HostError(Status::Unavailable(), "cannot read " + path);
  }
  if (text.str().size() > auth::kMaxKeyFileBytes) {
    return HostError(Status::ResourceExhausted(), path + " is larger than a key file can be");
  }
  return text.str();
}

}  // namespace

HostResult<std::vector<secagg::DeviceVerifyingKey>> ParseVerifyingKeys(std::string_view text,
                                                                       std::string_view name) {
  std::vector<secagg::DeviceVerifyingKey> keys;
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = Trim(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = std::string(name) + ":" + std::to_string(line_number) + ": ";
    const std::size_t gap = line.find_first_of(" \t");
    secagg::DeviceVerifyingKey entry;
    if (gap == std::string_view::npos || !ParseDeviceId(line.substr(0, gap), entry.device)) {
      return HostError(Status::DataLoss(),
                       where + "expected `DEVICE_ID HEX_KEY` with a decimal id from 1");
    }
    const std::string_view hex = Trim(line.substr(gap));
    if (hex.size() != 2 * entry.key.size()) {
      return HostError(Status::DataLoss(), where + "verifying key must be " +
                                               std::to_string(2 * entry.key.size()) +
                                               " hex digits, got " + std::to_string(hex.size()));
    }
    if (!auth::DecodeHex(hex, entry.key)) {
      return HostError(Status::DataLoss(), where + "verifying key has a non-hex digit");
    }
    if (const Status point = secagg::CheckVerifyingKey(entry.key); !point.ok()) {
      return HostError(Status::DataLoss(), where + point.reason());
    }
    keys.push_back(entry);
  }
  if (keys.empty()) return HostError(Status::InvalidArgument(), std::string(name) + " has no key");
  std::sort(keys.begin(), keys.end(),
            [](const auto& a, const auto& b) { return a.device < b.device; });
  for (std::size_t i = 1; i < keys.size(); ++i) {
    if (keys[i].device == keys[i - 1].device) {
      return HostError(Status::AlreadyExists(), std::string(name) + " names device " +
                                                    std::to_string(keys[i].device) + " twice");
    }
  }
  return keys;
}

std::string VerifyingKeyLine(std::uint32_t device, const secagg::VerifyingKey& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line = std::to_string(device) + ' ';
  for (const std::byte b : key) {
    line += kHex[std::to_integer<unsigned>(b) >> 4];
    line += kHex[std::to_integer<unsigned>(b) & 0xF];
  }
  line += '\n';
  return line;
}

HostResult<> LoadServerSigning(const std::string& path, std::uint32_t workers,
                               std::string_view flag, SecureSigning& out) {
  HostResult<std::string> text = ReadPublicFile(path);
  if (!text.ok()) return std::move(text).error().WithContext(std::string(flag));
  HostResult<std::vector<secagg::DeviceVerifyingKey>> keys = ParseVerifyingKeys(*text, path);
  if (!keys.ok()) return std::move(keys).error().WithContext(std::string(flag));
  out.ring = std::move(*keys);
  for (std::uint32_t device = 1; device <= workers; ++device) {
    const bool found =
        std::binary_search(out.ring.begin(), out.ring.end(), secagg::DeviceVerifyingKey{device, {}},
                           [](const auto& a, const auto& b) { return a.device < b.device; });
    if (!found) {
      return HostError(Status::InvalidArgument(), std::string(flag) + " " + path +
                                                      " has no verifying key for device " +
                                                      std::to_string(device));
    }
  }
  out.verifier.emplace(out.ring);
  return {};
}

HostResult<> LoadWorkerSigning(const std::string& signing_path, const std::string& verifying_path,
                               std::uint32_t device, SecureSigning& out) {
  EDGESGD_HOST_TRY(LoadServerSigning(verifying_path, 0, "--secagg-verifying-keys", out));
  auth::FixedKeyRing<1> own;
  if (HostResult<std::size_t> loaded = auth::LoadDeviceKey(signing_path, device, own);
      !loaded.ok()) {
    return std::move(loaded).error().WithContext("--secagg-signing-key");
  }
  secagg::SigningKey key{};
  const auto* found = own.Find(device);
  std::copy(found->key.begin(), found->key.end(), key.begin());
  secagg::VerifyingKey derived;
  const Status valid = secagg::VerifyingKeyOf(key, derived);
  const auto listed = std::find_if(out.ring.begin(), out.ring.end(),
                                   [&](const auto& entry) { return entry.device == device; });
  if (!valid.ok() || listed == out.ring.end() || listed->key != derived) {
    secagg::Wipe(key);
    return HostError(Status::InvalidArgument(),
                     "--secagg-signing-key " + signing_path + ": device " + std::to_string(device) +
                         "'s signing key " +
                         (valid.ok() ? "is not the one " + verifying_path + " lists for it"
                                     : std::string("is not a P-256 key: ") + valid.reason()));
  }
  out.signer.emplace(key);
  secagg::Wipe(key);
  return {};
}

}  // namespace edgesgd::cli
