#include "edgesgd/protocol/server_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "edgesgd/core/codecs/random_block.h"
#include "edgesgd/core/optimizer.h"
#include "edgesgd/core/random.h"
#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {
namespace {

using internal::AllFinite;
using internal::MatchesCodec;
using internal::MatchesScheduledCodec;
using internal::PayloadBits;
using internal::SaturatingAdd;

// Why a Join is refused; sent back in an Error frame (WorkerSlot::error_reason indexes this).
struct JoinRefusal {
  StatusCode code;
  const char* text;
};
constexpr std::array<JoinRefusal, 3> kJoinRefusals = {{
    {StatusCode::kFailedPrecondition, "worker does not implement this run's codec"},
    {StatusCode::kResourceExhausted, "worker memory is too small for this run"},
    {StatusCode::kResourceExhausted, "worker cannot receive this run's largest frame"},
}};

// Appends to a fixed ring, overwriting (and counting) the oldest entry when it is full.
template <typename T, std::size_t N>
void PushRing(std::array<T, N>& ring, std::size_t& head, std::size_t& size, const T& value,
              std::uint64_t& dropped) {
  if (size == N) {
    ring[head] = value;
    head = (head + 1) % N;
    ++dropped;
    return;
  }
  ring[(head + size) % N] = value;
  ++size;
}

template <typename T, std::size_t N>
bool PopRing(std::array<T, N>& ring, std::size_t& head, std::size_t& size, T& out) {
  if (size == 0) return false;
  out = ring[head];
  head = (head + 1) % N;
  --size;
  return true;
}


// ---- Checkpoint encoding ----

constexpr std::uint32_t kStateVersion = 1;
constexpr char kStateMagic[8] = {'E', 'D', 'G', 'S', 'C', 'K', 'P', 'T'};
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::uint64_t Fnv1a(std::uint64_t hash, std::span<const std::byte> bytes) {
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= kFnvPrime;
  }
  return hash;
}

// Little-endian field writer over a span the caller sized (StateBytes).
class StateWriter {
 public:
  explicit StateWriter(std::span<std::byte> out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    std::memcpy(out_.data() + at_, &value, sizeof(T));
    at_ += sizeof(T);
  }
  void PutBytes(std::span<const std::byte> bytes) {
    std::memcpy(out_.data() + at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }
  std::size_t size() const { return at_; }
  std::span<const std::byte> written() const { return out_.first(at_); }

 private:
  std::span<std::byte> out_;
  std::size_t at_ = 0;
};

class StateReader {
 public:
  explicit StateReader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T Get() {
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::span<const std::byte> Take(std::size_t bytes) {
    const std::span<const std::byte> taken = in_.subspan(at_, bytes);
    at_ += bytes;
    return taken;
  }
  std::size_t position() const { return at_; }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// Identifies a run: every field of the Welcome the workers get, field by field (structs have
// padding, so never their raw bytes), and the worker count.
std::uint64_t RunFingerprint(const RunConfig& config, std::uint32_t workers) {
  const wire::WelcomeInfo welcome = ToWelcomeInfo(config, 0, workers);
  std::uint64_t hash = kFnvOffset;
  const auto mix = [&hash](auto value) {
    hash = Fnv1a(hash, std::as_bytes(std::span(&value, 1)));
  };
  mix(welcome.workers);
  mix(welcome.rounds);
  mix(welcome.seed);
  mix(static_cast<std::uint64_t>(welcome.layout.tensor_count()));
  for (std::size_t t = 0; t < welcome.layout.tensor_count(); ++t) {
    mix(static_cast<std::uint64_t>(welcome.layout.size(t)));
  }
  const CodecParams& codec = welcome.codec;
  mix(static_cast<std::uint8_t>(codec.kind));
  mix(codec.k_ratio);
  mix(static_cast<std::uint8_t>(codec.rand_k_scaling));
  mix(codec.block_ratio);
  mix(static_cast<std::uint8_t>(codec.sign_scale));
  mix(codec.qsgd_levels);
  mix(codec.qsgd_bucket);
  const wire::TrainingConfig& training = welcome.training;
  mix(training.feedback);
  mix(training.detach);
  mix(training.optimizer);
  mix(training.learning_rate);
  mix(training.momentum);
  mix(training.weight_decay);
  mix(training.local_steps);
  mix(training.batch);
  mix(training.aggregate);
  mix(training.participation);
  mix(training.quant_schedule);
  mix(training.mode);
  mix(training.gossip);
  mix(training.topology);
  mix(training.gossip_rounds);
  return hash;
}

}  // namespace

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kMalformed:
      return "malformed";
    case RejectReason::kUnknownSender:
      return "unknown_sender";
    case RejectReason::kLate:
      return "late";
    case RejectReason::kStale:
      return "stale";
    case RejectReason::kFuture:
      return "future";
    case RejectReason::kDuplicate:
      return "duplicate";
    case RejectReason::kNotSelected:
      return "not_selected";
    case RejectReason::kWrongCodec:
      return "wrong_codec";
    case RejectReason::kBadPayload:
      return "bad_payload";
    case RejectReason::kUnexpectedMessage:
      return "unexpected_message";
    case RejectReason::kIncompatible:
      return "incompatible";
  }
  return "unknown";
}

Status ValidateServerOptions(const ServerOptions& options) {
  if (options.workers < 1 || options.workers > kMaxWorkers) {
    return Status::InvalidArgument("workers must be in 1..256");
  }
  if (options.quorum < 1 || options.quorum > options.workers) {
    return Status::InvalidArgument("quorum must be in 1..workers");
  }
  if (options.round_deadline_ns == 0) return Status::InvalidArgument("round deadline must be > 0");
  if (options.liveness_timeout_ns == 0) {
    return Status::InvalidArgument("liveness timeout must be > 0");
  }
  if (options.join_timeout_ns == 0) return Status::InvalidArgument("join timeout must be > 0");
  return Status::Ok();
}

// ---- Init ----

Status ServerSession::Init(Arena& arena, const RunConfig& config, const ServerOptions& options,
                                std::span<const float> initial_model) {
  if (phase_ != ServerPhase::kUninitialized) {
    return Status::FailedPrecondition("the server is already initialized");
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  if (const Status check = ValidateServerOptions(options); !check.ok()) return check;
  if (initial_model.size() != config.layout.dimension()) {
    return Status::InvalidArgument("the initial model's size is not the layout's dimension");
  }
  if (!AllFinite(initial_model)) return Status::InvalidArgument("the initial model is not finite");
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  const std::size_t needed = ArenaBytes(config, options);
  if (needed == 0) return Status::InvalidArgument("the configuration cannot be sized");
  if (arena.remaining_bytes() < needed) {
    return Status::ResourceExhausted("the arena is smaller than ServerSession::ArenaBytes");
  }
  config_ = config;
  options_ = options;
  if (!TakeBuffers(arena).ok()) {
    return Status::Internal("arena accounting disagrees with ArenaBytes");
  }
  std::copy(initial_model.begin(), initial_model.end(), model_.begin());
  for (WorkerSlot& slot : slots_) slot.held_round = kNoRound;
  max_receive_bytes_ = UpdateFrameBytes(config_);
  phase_ = ServerPhase::kJoining;
  return Status::Ok();
}

Status ServerSession::TakeBuffers(Arena& arena) {
  const TensorLayout& layout = config_.layout;
  const std::size_t d = layout.dimension();
  EDGESGD_TRY_ASSIGN(model_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(slots_, arena.Allocate<WorkerSlot>(std::size_t{options_.workers} + 1));
  EDGESGD_TRY_ASSIGN(candidates_, arena.Allocate<std::uint32_t>(options_.workers));
  EDGESGD_TRY_ASSIGN(std::span<std::byte> model_buffer,
                     arena.AllocateBytes(wire::FrameBuilderBytes(ModelCodec(), layout)));
  model_builder_.emplace(model_buffer);
  for (std::optional<wire::FrameBuilder>& builder : control_builders_) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(kControlBuilderBytes));
    builder.emplace(buffer);
  }
  EDGESGD_TRY_ASSIGN(std::span<std::byte> leave_buffer, arena.AllocateBytes(kControlBuilderBytes));
  leave_builder_.emplace(leave_buffer);

  const bool majority = config_.aggregation == AggregationKind::kMajority;
  const bool aggregate_downlink = config_.downlink == DownlinkKind::kAggregate;
  if (majority || aggregate_downlink) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer,
                       arena.AllocateBytes(wire::FrameBuilderBytes(config_.codec, layout)));
    aggregate_builder_.emplace(buffer);
  }
  if (majority) {
    EDGESGD_TRY(vote_.Init(arena, layout, options_.workers, config_.tie_rule));
  } else if (RecompressesDownlink(config_)) {
    EDGESGD_TRY(mean_.Init(arena, layout, config_.codec));
    EDGESGD_TRY(downlink_feedback_.Init(arena, layout, config_.codec));
    EDGESGD_TRY_ASSIGN(decode_scratch_,
                       arena.AllocateBytes(CodecScratchBytes(config_.codec, layout)));
  } else if (aggregate_downlink) {
    EDGESGD_TRY(payload_sum_.Init(arena, layout, config_.codec));
    EDGESGD_TRY_ASSIGN(decode_scratch_,
                       arena.AllocateBytes(CodecScratchBytes(config_.codec, layout)));
  } else {
    EDGESGD_TRY(mean_.Init(arena, layout, config_.codec));
  }
  if (config_.codec.kind == CodecKind::kQsgd) {
    EDGESGD_TRY(schedule_.Init(config_.quant_schedule, config_.codec.qsgd_levels, config_.rounds));
  }
  return Status::Ok();
}

// ---- Session ----

void ServerSession::DoStart(TimeNs now) {
  if (phase_ != ServerPhase::kJoining) return;
  started_ = true;
  join_deadline_ = SaturatingAdd(now, options_.join_timeout_ns);
  Advance(now);
}

void ServerSession::DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) {
  ++counters_.frames_received;
  counters_.bytes_received += frame.size();
  if (phase_ == ServerPhase::kUninitialized) return;

  const Result<wire::FrameView> decoded = wire::DecodeFrame(frame, max_receive_bytes_);
  if (!decoded.ok()) {
    Reject(from, RejectReason::kMalformed, round_, now);
    return;
  }
  const wire::FrameView& view = decoded.value();
  switch (view.kind) {
    case wire::MessageKind::kJoin:
      HandleJoin(from, view, now);
      break;
    case wire::MessageKind::kUpdate:
      HandleUpdate(from, view, now);
      break;
    case wire::MessageKind::kHeartbeat:
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkHeard(*slot, now);
      } else {
        Reject(from, RejectReason::kUnknownSender, view.header.round, now);
      }
      break;
    case wire::MessageKind::kLeave:
      // A worker leaving on its own (shutdown, failure, low power) is gone until it joins again.
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkGone(*slot);
      } else {
        Reject(from, RejectReason::kUnknownSender, view.header.round, now);
      }
      break;
    default:
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkHeard(*slot, now);
      }
      Reject(from, RejectReason::kUnexpectedMessage, view.header.round, now);
      break;
  }
  Advance(now);
}

void ServerSession::DoPeerLost(PeerId peer, TimeNs now) {
  if (WorkerSlot* slot = Slot(peer); slot != nullptr && slot->joined) MarkGone(*slot);
  Advance(now);
}

void ServerSession::DoTimer(TimeNs now) {
  if (phase_ != ServerPhase::kJoining && phase_ != ServerPhase::kTraining) return;
  if (options_.liveness_timeout_ns != kNever) {
    for (WorkerSlot& slot : slots_) {
      if (slot.joined && slot.live &&
          SaturatingAdd(slot.last_heard, options_.liveness_timeout_ns) <= now) {
        MarkGone(slot);
      }
    }
  }
  if (phase_ == ServerPhase::kJoining && now >= join_deadline_) join_deadline_passed_ = true;
  Advance(now);
}

bool ServerSession::DoPollFrame(OutgoingFrame& out) {
  const std::uint32_t n = options_.workers;
  std::uint32_t visited = 0;
  while (pending_workers_ > 0 && visited < n) {
    const PeerId peer = (poll_cursor_ - 1 + visited) % n + 1;
    WorkerSlot& slot = slots_[peer];
    if (slot.pending == 0) {
      ++visited;
      continue;
    }
    // Per worker, frames go out in protocol order: Welcome (or Error), broadcast, Leave.
    std::span<const std::byte> bytes;
    if ((slot.pending & kPendingWelcome) != 0) {
      const Result<std::span<const std::byte>> frame = BuildControlFrame(peer, kPendingWelcome);
      ClearPending(slot, kPendingWelcome);
      if (frame.ok()) bytes = frame.value();
    } else if ((slot.pending & kPendingError) != 0) {
      const Result<std::span<const std::byte>> frame = BuildControlFrame(peer, kPendingError);
      ClearPending(slot, kPendingError);
      if (frame.ok()) bytes = frame.value();
    } else if ((slot.pending & kPendingBroadcast) != 0) {
      bytes = slot.broadcast == kBroadcastAggregate ? aggregate_frame_ : model_frame_;
      ClearPending(slot, kPendingBroadcast);
    } else if ((slot.pending & kPendingLeave) != 0) {
      bytes = leave_frame_;
      ClearPending(slot, kPendingLeave);
    } else {
      ClearPending(slot, slot.pending);
    }
    if (bytes.empty()) continue;  // nothing could be built; look at this worker's next frame
    poll_cursor_ = peer;
    out.to = peer;
    out.bytes = bytes;
    out.work_samples = 0;
    ++counters_.frames_sent;
    counters_.bytes_sent += bytes.size();
    return true;
  }
  // Drained: the next batch goes out in peer order again (deterministic runs, and updates then
  // tend to arrive in peer order, which fixes the order of the float sums).
  poll_cursor_ = 1;
  return false;
}

TimeNs ServerSession::DoNextWakeup() const {
  TimeNs next = kNever;
  if (phase_ == ServerPhase::kJoining) {
    if (!join_deadline_passed_) next = join_deadline_;
  } else if (phase_ == ServerPhase::kTraining) {
    next = deadline_;
  } else {
    return kNever;
  }
  if (options_.liveness_timeout_ns != kNever) {
    for (const WorkerSlot& slot : slots_) {
      if (slot.joined && slot.live) {
        next = std::min(next, SaturatingAdd(slot.last_heard, options_.liveness_timeout_ns));
      }
    }
  }
  return next;
}

bool ServerSession::PollRejectEvent(RejectEvent& out) {
  return PopRing(reject_log_, reject_head_, reject_size_, out);
}

bool ServerSession::PollRoundEvent(RoundEvent& out) {
  return PopRing(round_log_, round_head_, round_size_, out);
}

std::uint32_t ServerSession::joined_workers() const {
  std::uint32_t count = 0;
  for (const WorkerSlot& slot : slots_) count += slot.joined ? 1u : 0u;
  return count;
}

std::uint32_t ServerSession::live_workers() const { return LiveCount(false, false); }

// ---- Frames from workers ----

const ServerSession::WorkerSlot* ServerSession::Slot(PeerId peer) const {
  if (peer == kServerPeer || peer > options_.workers || slots_.empty()) return nullptr;
  return &slots_[peer];
}

ServerSession::WorkerSlot* ServerSession::Slot(PeerId peer) {
  if (peer == kServerPeer || peer > options_.workers || slots_.empty()) return nullptr;
  return &slots_[peer];
}

ServerSession::WorkerSlot* ServerSession::KnownSender(PeerId from, std::uint32_t sender) {
  WorkerSlot* slot = Slot(from);
  if (slot == nullptr || !slot->joined || sender != from) return nullptr;
  return slot;
}

void ServerSession::HandleJoin(PeerId from, const wire::FrameView& view, TimeNs now) {
  WorkerSlot* slot = Slot(from);
  if (slot == nullptr ||
      (view.header.sender != from && view.header.sender != wire::kUnassignedDevice)) {
    Reject(from, RejectReason::kUnknownSender, view.header.round, now);
    return;
  }
  if (phase_ == ServerPhase::kDone) {
    // The run is over: tell a latecomer (or a worker that missed its Leave) so.
    if (!leave_frame_.empty()) SetPending(*slot, kPendingLeave);
    return;
  }
  if (const int reason = Incompatibility(view.join); reason >= 0) {
    Reject(from, RejectReason::kIncompatible, view.header.round, now);
    slot->error_reason = static_cast<std::uint8_t>(reason);
    SetPending(*slot, kPendingError);
    return;
  }
  if (slot->joined) {
    ++counters_.rejoins;
  } else {
    slot->joined = true;
    ++counters_.joins;
  }
  slot->live = true;
  slot->last_heard = now;
  // A (re)joining worker may hold any model or none: it gets the full model next.
  slot->held_round = kNoRound;
  SetPending(*slot, kPendingWelcome);
  if (phase_ == ServerPhase::kTraining && slot->selected && !slot->reported) {
    slot->broadcast = kBroadcastModel;
    SetPending(*slot, kPendingBroadcast);
  }
}

int ServerSession::Incompatibility(const wire::JoinInfo& join) const {
  // Zero fields mean "not stated" and are not checked.
  if (join.codecs != 0) {
    const std::uint32_t required =
        wire::CodecBit(config_.codec.kind) | wire::CodecBit(CodecKind::kIdentity);
    if ((join.codecs & required) != required) return 0;
  }
  // A device with 4 GiB or more reports the u32 maximum, which is not a limit.
  if (join.memory_bytes != 0 && join.memory_bytes != 0xFFFFFFFFu &&
      join.memory_bytes < WorkerSession::WelcomeArenaBytes(config_)) {
    return 1;
  }
  if (join.max_frame_bytes != 0 && join.max_frame_bytes < BroadcastFrameBytes(config_)) return 2;
  return -1;
}

void ServerSession::HandleUpdate(PeerId from, const wire::FrameView& view, TimeNs now) {
  const std::uint32_t round = view.header.round;
  WorkerSlot* slot = KnownSender(from, view.header.sender);
  if (slot == nullptr || view.message.update.worker != from) {
    Reject(from, RejectReason::kUnknownSender, round, now);
    return;
  }
  MarkHeard(*slot, now);
  if (phase_ == ServerPhase::kJoining) {
    Reject(from, RejectReason::kUnexpectedMessage, round, now);
    return;
  }
  if (round > round_ || (phase_ == ServerPhase::kDone && round == round_)) {
    Reject(from, RejectReason::kFuture, round, now);
    return;
  }
  if (round < round_) {
    Reject(from, round + 1 == round_ ? RejectReason::kLate : RejectReason::kStale, round, now);
    return;
  }
  if (!slot->selected) {
    Reject(from, RejectReason::kNotSelected, round, now);
    return;
  }
  if (slot->reported) {
    Reject(from, RejectReason::kDuplicate, round, now);
    return;
  }
  const bool matches = config_.codec.kind == CodecKind::kQsgd
                           ? MatchesScheduledCodec(config_.codec, schedule_, view.payload)
                           : MatchesCodec(config_.codec, view.payload);
  if (!matches) {
    Reject(from, RejectReason::kWrongCodec, round, now);
    return;
  }
  if (const std::optional<RejectReason> reason = Aggregate(from, view); reason.has_value()) {
    Reject(from, *reason, round, now);
    return;
  }
  slot->reported = true;
  slot->held_round = round;
  payload_bits_this_round_ += PayloadBits(view.payload.view);
  // A broadcast queued by a revival is no longer needed: the worker has answered.
  ClearPending(*slot, kPendingBroadcast);
  ++reported_;
  ++counters_.updates_accepted;
}

std::optional<RejectReason> ServerSession::Aggregate(PeerId from, const wire::FrameView& view) {
  const TensorLayout& layout = config_.layout;
  const CodecContext context{config_.seed, view.header.round, from};
  const PayloadView& payload = view.payload.view;
  if (config_.codec.kind == CodecKind::kRandomBlock) {
    // Blocks must start where the shared seed says; a block elsewhere would still decode, but
    // it is not the compressor every other worker ran (and payload sums would not line up).
    if (payload.indices.size() != layout.tensor_count()) return RejectReason::kBadPayload;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      if (payload.indices[t] != RandomBlockCodec::BlockStart(context, t, layout.size(t))) {
        return RejectReason::kBadPayload;
      }
    }
  }
  if (config_.aggregation == AggregationKind::kMajority) {
    // A vote is plain signs: one unit scale per tensor.
    if (payload.scales.size() != layout.tensor_count() || !payload.indices.empty() ||
        !payload.values.empty()) {
      return RejectReason::kBadPayload;
    }
    for (const float scale : payload.scales) {
      if (scale != 1.0f) return RejectReason::kBadPayload;
    }
    if (!vote_.AddVote(payload.words).ok()) return RejectReason::kBadPayload;
  } else if (config_.downlink == DownlinkKind::kAggregate && !RecompressesDownlink(config_)) {
    if (!payload_sum_.Add(payload, 1.0f).ok()) return RejectReason::kBadPayload;
  } else {
    // Decoded with the frame's own level count, which MatchesScheduledCodec accepted.
    if (!mean_.AddWithParams(wire::DecodeParams(config_.codec, view.payload), payload, context,
                             1.0f)
             .ok()) {
      return RejectReason::kBadPayload;
    }
  }
  return std::nullopt;
}

void ServerSession::MarkHeard(WorkerSlot& slot, TimeNs now) {
  slot.last_heard = now;
  if (slot.live) return;
  // Heard from a worker the server had given up on (a liveness timeout that was too short, a
  // link that came back): it counts again. Its model is unknown, so if it is a participant
  // still owing an update it gets the full model (if it already has the round, it re-sends
  // its update, which is then accepted or a harmless duplicate).
  slot.live = true;
  ++counters_.revivals;
  if (phase_ == ServerPhase::kTraining && slot.selected && !slot.reported) {
    slot.broadcast = kBroadcastModel;
    SetPending(slot, kPendingBroadcast);
  }
}

void ServerSession::MarkGone(WorkerSlot& slot) {
  if (slot.live) {
    slot.live = false;
    ++counters_.workers_lost;
  }
  slot.held_round = kNoRound;
  ClearPending(slot, kPendingWelcome | kPendingError | kPendingBroadcast);
}

void ServerSession::Reject(PeerId peer, RejectReason reason, std::uint32_t round, TimeNs now) {
  ++counters_.rejected[static_cast<std::size_t>(reason)];
  ++rejected_this_round_;
  const RejectEvent event{peer, reason, round, now};
  PushRing(reject_log_, reject_head_, reject_size_, event, counters_.reject_events_dropped);
}

// ---- Rounds ----

void ServerSession::Advance(TimeNs now) {
  if (phase_ == ServerPhase::kJoining) {
    const std::uint32_t live = LiveCount(false, false);
    const bool timed_out = join_deadline_passed_ || now >= join_deadline_;
    const std::uint32_t enough = std::max<std::uint32_t>(1, options_.quorum);
    if (live >= options_.workers || (timed_out && live >= enough)) StartTraining(now);
    return;
  }
  if (phase_ != ServerPhase::kTraining) return;

  // Participants that can still report: sampled, alive, not reported yet.
  const std::uint32_t waiting = LiveCount(true, true);
  if (reported_ >= 1 && waiting == 0) {
    CloseRound(now);
    return;
  }
  if (now >= deadline_) {
    std::uint32_t reachable = 0;
    for (const WorkerSlot& slot : slots_) {
      reachable += (slot.selected && (slot.live || slot.reported)) ? 1u : 0u;
    }
    const std::uint32_t quorum =
        std::max<std::uint32_t>(1, std::min<std::uint32_t>(options_.quorum, reachable));
    if (reported_ >= quorum) {
      CloseRound(now);
    } else {
      ExtendRound(now);
    }
    return;
  }
  // Nobody sampled can report (all of them vanished): sample everyone else who is alive
  // rather than wait for the deadline.
  if (reported_ == 0 && waiting == 0) TopUp();
}

void ServerSession::StartTraining(TimeNs now) {
  phase_ = ServerPhase::kTraining;
  // round_ is 0, or the round RestoreState resumed at.
  StartRound(now);
}

void ServerSession::StartRound(TimeNs now) {
  for (WorkerSlot& slot : slots_) {
    slot.selected = false;
    slot.reported = false;
    ClearPending(slot, kPendingBroadcast);
  }
  selected_ = 0;
  reported_ = 0;
  payload_bits_this_round_ = 0;
  rejected_this_round_ = 0;
  extensions_this_round_ = 0;
  mean_.Reset();
  payload_sum_.Reset();
  vote_.Reset();
  if (const Status built = BuildModelFrame(); !built.ok()) {
    Finish(wire::LeaveReason::kFailure, Status::Internal());
    return;
  }

  // Sample round(P * live) of the live workers (at least one), by a partial Fisher-Yates
  // shuffle driven by the shared participation stream: the same workers for the same seed,
  // round and set of live workers, on every machine.
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    if (slots_[peer].joined && slots_[peer].live) candidates_[count++] = peer;
  }
  if (count > 0) {
    const double exact = static_cast<double>(config_.participation) * count + 0.5;
    std::uint32_t take = static_cast<std::uint32_t>(exact);
    take = std::clamp<std::uint32_t>(take, 1, count);
    if (take < count) {
      CounterRng rng(config_.seed, round_, 0, StreamId(RandomPurpose::kParticipation));
      for (std::uint32_t i = 0; i < take; ++i) {
        const std::uint32_t j = i + rng.NextBelow(count - i);
        std::swap(candidates_[i], candidates_[j]);
      }
    }
    for (std::uint32_t i = 0; i < take; ++i) Select(slots_[candidates_[i]]);
  }
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
}

void ServerSession::Select(WorkerSlot& slot) {
  slot.selected = true;
  ++selected_;
  // The aggregate of the previous round is only useful to a worker known to hold that round's
  // start model: one whose update for it was accepted.
  const bool holds_previous = round_ > 0 && slot.held_round == round_ - 1;
  slot.broadcast =
      config_.downlink == DownlinkKind::kAggregate && aggregate_valid_ && holds_previous
          ? kBroadcastAggregate
          : kBroadcastModel;
  SetPending(slot, kPendingBroadcast);
}

void ServerSession::ExtendRound(TimeNs now) {
  ++counters_.deadline_extensions;
  ++extensions_this_round_;
  bool resent = false;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.selected && slot.live && !slot.reported) {
      SetPending(slot, kPendingBroadcast);
      resent = true;
    }
  }
  if (!resent) TopUp();
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
}

void ServerSession::TopUp() {
  std::uint32_t added = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.joined && slot.live && !slot.selected) {
      Select(slot);
      ++added;
    }
  }
  if (added > 0) ++counters_.top_ups;
}

void ServerSession::CloseRound(TimeNs now) {
  const Status applied = ApplyRound();
  const RoundEvent event{round_,
                         now,
                         selected_,
                         reported_,
                         rejected_this_round_,
                         extensions_this_round_,
                         counters_.bytes_received,
                         counters_.bytes_sent,
                         payload_bits_this_round_};
  PushRing(round_log_, round_head_, round_size_, event, counters_.round_events_dropped);
  last_reported_ = reported_;
  if (!applied.ok()) {
    Finish(wire::LeaveReason::kFailure, applied);
    return;
  }
  ++counters_.rounds_completed;
  ++round_;
  if (round_ >= config_.rounds) {
    Finish(wire::LeaveReason::kDone, Status::Ok());
    return;
  }
  StartRound(now);
}

Status ServerSession::ApplyRound() {
  if (config_.aggregation == AggregationKind::kMajority ||
      config_.downlink == DownlinkKind::kAggregate) {
    EDGESGD_TRY(BroadcastAndApplyAggregate());
  } else {
    EDGESGD_TRY(mean_.AddScaledMean(-1.0f, model_));
  }
  // A diverged run would broadcast NaN forever; stop it instead, loudly.
  if (!AllFinite(model_)) return Status::DataLoss();
  return Status::Ok();
}

Status ServerSession::BroadcastAndApplyAggregate() {
  const TensorLayout& layout = config_.layout;
  const wire::FrameHeader header = NextHeader(round_ + 1);
  const wire::PayloadMessage message =
      wire::PayloadMessage::ModelBroadcast({wire::BroadcastContent::kAggregate, reported_});
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans, aggregate_builder_->BeginPayloadFrame(
                                                   header, message, config_.codec, layout));
  const CodecContext context{config_.seed, round_, 0};
  if (const Status filled = FillAggregate(spans, context); !filled.ok()) {
    aggregate_builder_->AbandonPayloadFrame();
    return filled;
  }
  EDGESGD_TRY_ASSIGN(aggregate_frame_, aggregate_builder_->FinishPayloadFrame());
  const Result<wire::FrameView> view = wire::DecodeFrame(aggregate_frame_);
  if (!view.ok()) return Status::Internal();
  // The server applies the frame's own bytes, exactly as every worker will: their models stay
  // bit-identical to this one.
  const PayloadView& payload = view.value().payload.view;
  if (config_.aggregation == AggregationKind::kMajority) {
    EDGESGD_TRY(ApplySignVote(payload.words, layout, config_.optimizer.learning_rate,
                              config_.optimizer.weight_decay, model_));
  } else {
    EDGESGD_TRY(
        DecodeAdd(config_.codec, layout, context, payload, -1.0f, model_, decode_scratch_));
  }
  aggregate_valid_ = true;
  return Status::Ok();
}

Status ServerSession::FillAggregate(const PayloadSpans& spans, const CodecContext& context) {
  if (config_.aggregation == AggregationKind::kMajority) {
    // V = sign(sum_i sign(m_i)) as plain signs: one unit scale per tensor.
    EDGESGD_TRY(vote_.Finish(spans.words));
    std::fill(spans.scales.begin(), spans.scales.end(), 1.0f);
    return Status::Ok();
  }
  if (RecompressesDownlink(config_)) {
    // The dense mean joins the server's residual, whose compression is the broadcast.
    EDGESGD_TRY_ASSIGN(const std::span<const float> mean, mean_.Mean());
    return downlink_feedback_.Compress(mean, context, spans).status();
  }
  // The mean in payload space.
  EDGESGD_TRY_ASSIGN(const PayloadView mean, payload_sum_.Mean());
  std::copy(mean.indices.begin(), mean.indices.end(), spans.indices.begin());
  std::copy(mean.values.begin(), mean.values.end(), spans.values.begin());
  return Status::Ok();
}

Status ServerSession::BuildModelFrame() {
  const wire::FrameHeader header = NextHeader(round_);
  const wire::PayloadMessage message =
      wire::PayloadMessage::ModelBroadcast({wire::BroadcastContent::kModel, last_reported_});
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans, model_builder_->BeginPayloadFrame(
                                                   header, message, ModelCodec(), config_.layout));
  std::copy(model_.begin(), model_.end(), spans.values.begin());
  EDGESGD_TRY_ASSIGN(model_frame_, model_builder_->FinishPayloadFrame());
  return Status::Ok();
}

void ServerSession::Finish(wire::LeaveReason reason, Status status) {
  status_ = status;
  const Result<std::span<const std::byte>> leave =
      leave_builder_->EncodeLeave(NextHeader(round_), wire::LeaveInfo{reason});
  leave_frame_ = leave.ok() ? leave.value() : std::span<const std::byte>();
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    ClearPending(slot, kPendingBroadcast);
    if (slot.joined && !leave_frame_.empty()) SetPending(slot, kPendingLeave);
  }
  phase_ = ServerPhase::kDone;
  deadline_ = kNever;
}

// ---- Outgoing frames ----

void ServerSession::SetPending(WorkerSlot& slot, std::uint8_t bits) {
  if (bits == 0) return;
  if (slot.pending == 0) ++pending_workers_;
  slot.pending = static_cast<std::uint8_t>(slot.pending | bits);
}

void ServerSession::ClearPending(WorkerSlot& slot, std::uint8_t bits) {
  if (slot.pending == 0) return;
  slot.pending = static_cast<std::uint8_t>(slot.pending & ~bits);
  if (slot.pending == 0) --pending_workers_;
}

Result<std::span<const std::byte>> ServerSession::BuildControlFrame(PeerId peer, std::uint8_t bit) {
  // A ring of builders: a frame handed out by PollFrame stays intact while the next few control
  // frames are built (one per call in practice, so a drained driver never sees it reused).
  wire::FrameBuilder& builder = *control_builders_[next_control_slot_];
  next_control_slot_ = (next_control_slot_ + 1) % kControlSlots;
  const wire::FrameHeader header = NextHeader(round_);
  if (bit == kPendingWelcome) {
    return builder.EncodeWelcome(header, ToWelcomeInfo(config_, peer, options_.workers));
  }
  const JoinRefusal& reason = kJoinRefusals[slots_[peer].error_reason];
  return builder.EncodeError(header, wire::ErrorInfo{reason.code, reason.text});
}

wire::FrameHeader ServerSession::NextHeader(std::uint32_t round) {
  return wire::FrameHeader{kServerPeer, round, sequence_++};
}

std::uint32_t ServerSession::LiveCount(bool selected_only, bool non_reporters_only) const {
  std::uint32_t count = 0;
  for (const WorkerSlot& slot : slots_) {
    if (!slot.joined || !slot.live) continue;
    if (selected_only && !slot.selected) continue;
    if (non_reporters_only && slot.reported) continue;
    ++count;
  }
  return count;
}

Result<std::size_t> ServerSession::SaveState(std::span<std::byte> out) const {
  if (phase_ == ServerPhase::kUninitialized) return Status::FailedPrecondition();
  const std::size_t bytes = StateBytes(config_);
  if (out.size() < bytes) return Status::ResourceExhausted();
  StateWriter writer(out);
  writer.PutBytes(std::as_bytes(std::span(kStateMagic)));
  writer.Put(kStateVersion);
  writer.Put(static_cast<std::uint32_t>(model_.size()));
  writer.Put(RunFingerprint(config_, options_.workers));
  writer.Put(round_);
  writer.Put(config_.rounds);
  writer.Put(sequence_);
  writer.Put(counters_.bytes_received);
  writer.Put(counters_.bytes_sent);
  writer.Put(counters_.frames_received);
  writer.Put(counters_.frames_sent);
  writer.Put(counters_.rounds_completed);
  writer.PutBytes(std::as_bytes(model_));
  if (RecompressesDownlink(config_)) {
    writer.PutBytes(std::as_bytes(downlink_feedback_.residual()));
  }
  writer.Put(Fnv1a(kFnvOffset, writer.written()));
  return writer.size();
}

Status ServerSession::RestoreState(std::span<const std::byte> state) {
  if (phase_ != ServerPhase::kJoining || started_) {
    return Status::FailedPrecondition("a checkpoint can only be restored after Init and before Start");
  }
  const Status damaged = Status::DataLoss("the checkpoint is damaged or not a checkpoint");
  if (state.size() < kStateHeaderBytes + kStateTrailerBytes ||
      std::memcmp(state.data(), kStateMagic, sizeof(kStateMagic)) != 0) {
    return damaged;
  }
  if (state.size() != StateBytes(config_)) {
    // A whole checkpoint of another model, or a truncated / extended one of this model.
    std::uint32_t dimension = 0;
    std::memcpy(&dimension, state.data() + sizeof(kStateMagic) + 4, sizeof(dimension));
    if (dimension != model_.size()) {
      return Status::InvalidArgument("the checkpoint holds a model of another size");
    }
    return damaged;
  }
  const std::size_t body = state.size() - kStateTrailerBytes;
  std::uint64_t stored_checksum = 0;
  std::memcpy(&stored_checksum, state.data() + body, sizeof(stored_checksum));
  if (std::memcmp(state.data(), kStateMagic, sizeof(kStateMagic)) != 0 ||
      Fnv1a(kFnvOffset, state.first(body)) != stored_checksum) {
    return damaged;
  }
  StateReader reader(state);
  reader.Take(sizeof(kStateMagic));
  if (reader.Get<std::uint32_t>() != kStateVersion) {
    return Status::DataLoss("the checkpoint has another format version");
  }
  if (reader.Get<std::uint32_t>() != model_.size()) {
    return Status::InvalidArgument("the checkpoint holds a model of another size");
  }
  if (reader.Get<std::uint64_t>() != RunFingerprint(config_, options_.workers)) {
    return Status::InvalidArgument(
        "the checkpoint was written for another configuration (flags or worker count differ)");
  }
  const auto round = reader.Get<std::uint32_t>();
  const auto rounds = reader.Get<std::uint32_t>();
  if (rounds != config_.rounds || round > rounds) {
    return Status::DataLoss("the checkpoint's round is out of range");
  }
  const auto sequence = reader.Get<std::uint64_t>();
  ServerCounters counters;
  counters.bytes_received = reader.Get<std::uint64_t>();
  counters.bytes_sent = reader.Get<std::uint64_t>();
  counters.frames_received = reader.Get<std::uint64_t>();
  counters.frames_sent = reader.Get<std::uint64_t>();
  counters.rounds_completed = reader.Get<std::uint64_t>();
  const std::span<const std::byte> model = reader.Take(model_.size() * sizeof(float));
  const bool has_residual = RecompressesDownlink(config_);
  const std::span<const std::byte> residual =
      has_residual ? reader.Take(model_.size() * sizeof(float)) : std::span<const std::byte>{};
  // Check before touching the live state: a failed restore leaves the session as it was.
  for (std::size_t i = 0; i < model_.size(); ++i) {
    float value;
    std::memcpy(&value, model.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(value)) return Status::InvalidArgument("the checkpoint's model is not finite");
  }
  if (has_residual && !downlink_feedback_.RestoreResidual(residual).ok()) {
    return Status::InvalidArgument("the checkpoint's downlink residual is not finite");
  }
  std::memcpy(model_.data(), model.data(), model.size());
  round_ = round;
  sequence_ = sequence;
  counters_.bytes_received = counters.bytes_received;
  counters_.bytes_sent = counters.bytes_sent;
  counters_.frames_received = counters.frames_received;
  counters_.frames_sent = counters.frames_sent;
  counters_.rounds_completed = counters.rounds_completed;
  if (round_ >= config_.rounds) Finish(wire::LeaveReason::kDone, Status::Ok());
  return Status::Ok();
}

}  // namespace edgesgd::protocol
