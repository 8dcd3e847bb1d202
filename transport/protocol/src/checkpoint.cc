#include "edgesgd/protocol/checkpoint.h"

#include <cmath>
#include <cstring>

#include "edgesgd/core/privacy/rdp_accountant.h"

namespace edgesgd::protocol {
namespace {

constexpr char kMagic[8] = {'E', 'D', 'G', 'S', 'C', 'K', 'P', 'T'};
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;
constexpr std::size_t kStateFixedBytes = 4 + 4 + 8 + 5 * 8;

std::size_t ServerOptimizerFloats(const RunConfig& config) {
  return ServerOptimizer::StateFloats(config.layout.dimension(), config.server_optimizer);
}

std::uint64_t Fnv1a(std::span<const std::byte> bytes) {
  std::uint64_t hash = kFnvOffset;
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= kFnvPrime;
  }
  return hash;
}

std::size_t ConfigurationBytes(const RunConfig& config, std::uint32_t workers) {
  std::size_t bytes = 0;
  ForEachRunConfigField(config, workers, [&bytes](std::string_view name, std::uint64_t) {
    bytes += 1 + name.size() + 8;
  });
  return bytes;
}

// Little-endian writer over a span the caller sized.
class Writer {
 public:
  explicit Writer(std::span<std::byte> out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    Bytes(std::as_bytes(std::span<const T, 1>(&value, 1)));
  }
  void Bytes(std::span<const std::byte> bytes) {
    if (bytes.empty()) return;  // an empty section may have no storage (data() null)
    std::memcpy(out_.data() + at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }
  std::size_t size() const { return at_; }
  std::span<const std::byte> written() const { return out_.first(at_); }

 private:
  std::span<std::byte> out_;
  std::size_t at_ = 0;
};

// Reader that refuses to run past its span: every Get/Take after a short read fails.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  bool Get(T& value) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Take(std::size_t bytes, std::span<const std::byte>& out) {
    if (in_.size() - at_ < bytes) return false;
    out = in_.subspan(at_, bytes);
    at_ += bytes;
    return true;
  }
  std::size_t position() const { return at_; }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// Compares the stored configuration records with this run's fields, in order.
Status CompareConfiguration(std::span<const std::byte> records, const RunConfig& config,
                            std::uint32_t workers, std::string_view* differing_field) {
  Reader reader(records);
  std::string_view differs;
  bool found = false;
  ForEachRunConfigField(config, workers, [&](std::string_view name, std::uint64_t value) {
    if (found) return;
    std::uint8_t length = 0;
    std::span<const std::byte> stored_name;
    std::uint64_t stored_value = 0;
    const bool read =
        reader.Get(length) && reader.Take(length, stored_name) && reader.Get(stored_value);
    const bool same_name =
        read && std::string_view(reinterpret_cast<const char*>(stored_name.data()),
                                 stored_name.size()) == name;
    if (!same_name || stored_value != value) {
      differs = name;
      found = true;
    }
  });
  if (!found && reader.position() == records.size()) return Status::Ok();
  if (differing_field != nullptr) *differing_field = differs;
  return Status::InvalidArgument(
      "the checkpoint was written for another configuration (a setting or the worker count "
      "differs)");
}

}  // namespace

// Doubles of a private run's privacy account: its RDP at every order.
std::size_t PrivacyValues(const RunConfig& config) {
  return IsPrivate(config.privacy) ? kRdpOrders.size() : 0;
}

std::size_t CheckpointBytes(const RunConfig& config, std::uint32_t workers,
                            std::size_t aggregation_bytes) {
  return sizeof(kMagic) + 4 + 4 + ConfigurationBytes(config, workers) + kStateFixedBytes + 4 +
         4 * config.layout.dimension() + 4 + aggregation_bytes + 4 +
         4 * ServerOptimizerFloats(config) + 4 + 8 + 8 * PrivacyValues(config) + 8;
}

Result<std::size_t> WriteCheckpoint(std::span<std::byte> out, const RunConfig& config,
                                    std::uint32_t workers, const CheckpointState& state) {
  if (state.model.size() != 4 * config.layout.dimension()) {
    return Status::InvalidArgument("the model is not the layout's size");
  }
  if (state.server_optimizer.size() != 4 * ServerOptimizerFloats(config)) {
    return Status::InvalidArgument("the server optimizer's state is not the configuration's size");
  }
  if (state.privacy_rdp.size() != 8 * PrivacyValues(config)) {
    return Status::InvalidArgument("the privacy account is not the configuration's size");
  }
  if (out.size() < CheckpointBytes(config, workers, state.aggregation.size())) {
    return Status::ResourceExhausted("the checkpoint buffer is too small");
  }
  Writer writer(out);
  writer.Bytes(std::as_bytes(std::span(kMagic)));
  writer.Put(kCheckpointVersion);
  writer.Put(static_cast<std::uint32_t>(ConfigurationBytes(config, workers)));
  ForEachRunConfigField(config, workers, [&writer](std::string_view name, std::uint64_t value) {
    writer.Put(static_cast<std::uint8_t>(name.size()));
    writer.Bytes(std::as_bytes(std::span(name.data(), name.size())));
    writer.Put(value);
  });
  writer.Put(state.round);
  writer.Put(state.rounds);
  writer.Put(state.sequence);
  writer.Put(state.counters.bytes_received);
  writer.Put(state.counters.bytes_sent);
  writer.Put(state.counters.frames_received);
  writer.Put(state.counters.frames_sent);
  writer.Put(state.counters.rounds_completed);
  writer.Put(static_cast<std::uint32_t>(config.layout.dimension()));
  writer.Bytes(state.model);
  writer.Put(static_cast<std::uint32_t>(state.aggregation.size()));
  writer.Bytes(state.aggregation);
  writer.Put(static_cast<std::uint32_t>(ServerOptimizerFloats(config)));
  writer.Bytes(state.server_optimizer);
  writer.Put(static_cast<std::uint32_t>(PrivacyValues(config)));
  writer.Put(state.privacy_rounds);
  writer.Bytes(state.privacy_rdp);
  writer.Put(Fnv1a(writer.written()));
  return writer.size();
}

Status ReadCheckpoint(std::span<const std::byte> bytes, const RunConfig& config,
                      std::uint32_t workers, std::size_t aggregation_bytes, CheckpointState& out,
                      std::string_view* differing_field) {
  const Status damaged = Status::DataLoss("the checkpoint is damaged or not a checkpoint");
  if (bytes.size() < sizeof(kMagic) + 4 + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return damaged;
  }
  Reader reader(bytes.first(bytes.size() - 8));
  std::span<const std::byte> magic;
  std::uint32_t version = 0;
  if (!reader.Take(sizeof(kMagic), magic) || !reader.Get(version)) return damaged;
  if (version != kCheckpointVersion) {
    return Status::DataLoss("the checkpoint has another format version");
  }
  std::uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + bytes.size() - 8, sizeof(checksum));
  if (Fnv1a(bytes.first(bytes.size() - 8)) != checksum) return damaged;

  std::uint32_t configuration_bytes = 0;
  std::span<const std::byte> records;
  if (!reader.Get(configuration_bytes) || !reader.Take(configuration_bytes, records)) {
    return damaged;
  }
  EDGESGD_TRY(CompareConfiguration(records, config, workers, differing_field));

  CheckpointState state;
  std::uint32_t dimension = 0;
  std::uint32_t aggregation_size = 0;
  std::uint32_t server_optimizer_floats = 0;
  std::uint32_t privacy_values = 0;
  if (!reader.Get(state.round) || !reader.Get(state.rounds) || !reader.Get(state.sequence) ||
      !reader.Get(state.counters.bytes_received) || !reader.Get(state.counters.bytes_sent) ||
      !reader.Get(state.counters.frames_received) || !reader.Get(state.counters.frames_sent) ||
      !reader.Get(state.counters.rounds_completed) || !reader.Get(dimension) ||
      dimension != config.layout.dimension() ||
      !reader.Take(4 * std::size_t{dimension}, state.model) || !reader.Get(aggregation_size) ||
      aggregation_size != aggregation_bytes || !reader.Take(aggregation_size, state.aggregation) ||
      !reader.Get(server_optimizer_floats) ||
      server_optimizer_floats != ServerOptimizerFloats(config) ||
      !reader.Take(4 * std::size_t{server_optimizer_floats}, state.server_optimizer) ||
      !reader.Get(privacy_values) || privacy_values != PrivacyValues(config) ||
      !reader.Get(state.privacy_rounds) || (privacy_values == 0 && state.privacy_rounds != 0) ||
      !reader.Take(8 * std::size_t{privacy_values}, state.privacy_rdp) ||
      reader.position() != bytes.size() - 8) {
    return damaged;
  }
  if (state.rounds != config.rounds || state.round > state.rounds) {
    return Status::DataLoss("the checkpoint's round is out of range");
  }
  for (std::size_t at = 0; at < state.model.size(); at += sizeof(float)) {
    float value;
    std::memcpy(&value, state.model.data() + at, sizeof(float));
    if (!std::isfinite(value))
      return Status::InvalidArgument("the checkpoint's model is not finite");
  }
  out = state;
  return Status::Ok();
}

}  // namespace edgesgd::protocol
