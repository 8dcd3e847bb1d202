#include "edgesgd/auth/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>

#include "edgesgd/auth/hmac_sha256.h"

namespace edgesgd::auth {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

// The next blank-separated field of `text`, removed from it.
std::string_view TakeField(std::string_view& text) {
  std::size_t end = 0;
  while (end < text.size() && !IsBlank(text[end])) ++end;
  const std::string_view field = text.substr(0, end);
  text = TrimBlanks(text.substr(end));
  return field;
}

HostError Failure(StatusCode code, std::string message) {
  return HostError(Status(code), std::move(message));
}

std::string LinePrefix(std::string_view name, std::size_t line) {
  return std::string(name) + ":" + std::to_string(line) + ": ";
}

// The parser of ParseKeyFile, LoadKeyFile and LoadDeviceKey: adds the key of every line of
// `text` to `ring`, or with `only_device` that device's key alone (the other lines' syntax is
// checked, their keys dropped).
HostResult<std::size_t> ParseKeys(std::string_view text, std::string_view name,
                                  std::optional<std::uint32_t> only_device, KeyRing& ring) {
  std::size_t line_number = 0;
  std::size_t added = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = TrimBlanks(line);
    if (line.empty() || line.front() == '#') continue;

    const std::string where = LinePrefix(name, line_number);
    const std::string_view id_field = TakeField(line);
    const std::string_view key_field = TakeField(line);
    if (key_field.empty()) {
      return Failure(StatusCode::kDataLoss, where + "expected `DEVICE_ID HEX_KEY`");
    }
    if (!line.empty()) {
      return Failure(StatusCode::kDataLoss, where + "unexpected text after the key");
    }
    std::uint64_t device = 0;
    for (const char c : id_field) {
      if (c < '0' || c > '9' || id_field.size() > 10) {
        return Failure(StatusCode::kDataLoss, where + "device id must be a decimal number, got '" +
                                                  std::string(id_field.substr(0, 16)) + "'");
      }
      device = device * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (device >= kNoDevice) {
      return Failure(StatusCode::kDataLoss, where + "device id must be below 4294967295");
    }
    if (key_field.size() != 2 * kKeyBytes) {
      return Failure(StatusCode::kDataLoss, where + "key must be 64 hex digits, got " +
                                                std::to_string(key_field.size()) + " characters");
    }
    std::array<std::byte, kKeyBytes> key;
    if (!DecodeKeyHex(key_field, key)) {
      return Failure(StatusCode::kDataLoss, where + "key must be 64 hex digits");
    }
    const auto device_id = static_cast<std::uint32_t>(device);
    if (only_device.value_or(device_id) != device_id) {
      Zeroize(key);
      continue;
    }
    // A second line for the device fails here as kAlreadyExists, even in a one-key ring: Add
    // looks the device up before it checks for room.
    const Status added_status = ring.Add(device_id, key);
    Zeroize(key);
    const std::string device_text = "device " + std::to_string(device_id);
    switch (added_status.code()) {
      case StatusCode::kOk:
        ++added;
        break;
      case StatusCode::kAlreadyExists:
        return Failure(StatusCode::kAlreadyExists, where + device_text + " has a key already");
      case StatusCode::kResourceExhausted:
        return Failure(StatusCode::kResourceExhausted,
                       where + "more than " + std::to_string(ring.capacity()) + " keys");
      default:
        return Failure(StatusCode::kInvalidArgument,
                       where + "key of " + device_text + " is all zeros");
    }
  }
  if (added == 0 && only_device) {
    return Failure(
        StatusCode::kInvalidArgument,
        "key file " + std::string(name) + " has no key for device " + std::to_string(*only_device));
  }
  if (added == 0) {
    return Failure(StatusCode::kInvalidArgument, std::string(name) + ": no keys");
  }
  return added;
}

// Reads the key file at `path` into `text`, refusing it unread when group or others have any
// access to it. On failure `text` may hold part of the file.
HostResult<> ReadKeyFile(const std::string& path, std::string& text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return Failure(error == ENOENT ? StatusCode::kNotFound : StatusCode::kUnavailable,
                   "cannot open key file " + path + ": " + std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Failure(StatusCode::kUnavailable, "key file " + path + " is not a regular file");
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    // Refused, not read: a key others can read is no longer a secret, and a node that ran with
    // it would have its frames vouched for by whoever else read it.
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Failure(StatusCode::kFailedPrecondition,
                   "key file " + path + " is accessible by group or others (mode " + mode +
                       "): run chmod 600 " + path + " (and make new keys if others read it)");
  }
  if (info.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    ::close(fd);
    return Failure(StatusCode::kDataLoss, "key file " + path + " is larger than 1 MiB");
  }
  text.assign(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t filled = 0;
  const char* read_error = nullptr;
  while (filled < text.size() && read_error == nullptr) {
    const ssize_t got = ::read(fd, text.data() + filled, text.size() - filled);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
    } else if (got == 0) {
      read_error = "file shrank while being read";
    } else if (errno != EINTR) {
      read_error = std::strerror(errno);
    }
  }
  ::close(fd);
  if (read_error != nullptr) {
    return Failure(StatusCode::kUnavailable, "cannot read key file " + path + ": " + read_error);
  }
  return {};
}

// Reads the key file at `path` and parses it with ParseKeys; zeroizes the read buffer after.
HostResult<std::size_t> LoadKeys(const std::string& path, std::optional<std::uint32_t> only_device,
                                 KeyRing& ring) {
  std::string text;
  HostResult<> read = ReadKeyFile(path, text);
  HostResult<std::size_t> load =
      read.ok() ? ParseKeys(text, path, only_device, ring) : std::move(read).error();
  Zeroize(std::as_writable_bytes(std::span<char>(text)));
  return load;
}

}  // namespace

HostResult<std::size_t> ParseKeyFile(std::string_view text, std::string_view name, KeyRing& ring) {
  return ParseKeys(text, name, std::nullopt, ring);
}

HostResult<std::size_t> LoadKeyFile(const std::string& path, KeyRing& ring) {
  return LoadKeys(path, std::nullopt, ring);
}

HostResult<std::size_t> LoadDeviceKey(const std::string& path, std::uint32_t device,
                                      KeyRing& ring) {
  return LoadKeys(path, device, ring);
}

}  // namespace edgesgd::auth
