#include "edgesgd/protocol/server_outbox.h"

#include <algorithm>

namespace edgesgd::protocol {

Status ServerOutbox::Init(Arena& arena, const RunConfig& config, std::uint32_t workers,
                          bool aggregate_frames, SecureRound* secure) {
  config_ = &config;
  workers_ = workers;
  EDGESGD_TRY_ASSIGN(entries_, arena.Allocate<Entry>(std::size_t{workers} + 1));
  EDGESGD_TRY_ASSIGN(std::span<std::byte> model,
                     arena.AllocateBytes(BuilderBytesFor(ModelFrameBytes(config))));
  model_builder_.emplace(model);
  for (std::optional<wire::FrameBuilder>& builder : control_builders_) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(kControlBuilderBytes));
    builder.emplace(buffer);
  }
  EDGESGD_TRY_ASSIGN(std::span<std::byte> leave, arena.AllocateBytes(kControlBuilderBytes));
  leave_builder_.emplace(leave);
  if (aggregate_frames) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer,
                       arena.AllocateBytes(wire::FrameBuilderBytes(config.codec, config.layout)));
    aggregate_builder_.emplace(buffer);
  }
  if (config.secure.enabled) {
    if (secure == nullptr) return Status::InvalidArgument("a secure run needs its SecureRound");
    const std::size_t bytes = BuilderBytesFor(SecureDownlinkFrameBytes(config, workers));
    for (std::optional<wire::FrameBuilder>& builder : secure_builders_) {
      EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(bytes));
      builder.emplace(buffer);
    }
    secure_ = secure;
  }
  return Status::Ok();
}

void ServerOutbox::Owe(PeerId peer, std::uint8_t frames) {
  Entry& entry = entries_[peer];
  if (frames == 0) return;
  if (entry.owed == 0) ++owing_;
  entry.owed = static_cast<std::uint8_t>(entry.owed | frames);
}

void ServerOutbox::Forgive(PeerId peer, std::uint8_t frames) {
  Entry& entry = entries_[peer];
  if (entry.owed == 0) return;
  entry.owed = static_cast<std::uint8_t>(entry.owed & ~frames);
  if (entry.owed == 0) --owing_;
}

bool ServerOutbox::Owes(PeerId peer, Frame frame) const {
  return (entries_[peer].owed & frame) != 0;
}

void ServerOutbox::OweBroadcast(PeerId peer, bool aggregate) {
  entries_[peer].aggregate = aggregate;
  Owe(peer, kBroadcast);
}

void ServerOutbox::OweRefusal(PeerId peer, StatusCode code, const char* why) {
  entries_[peer].refusal_code = code;
  entries_[peer].refusal_why = why;
  Owe(peer, kRefusal);
}

Status ServerOutbox::BuildModel(std::uint32_t round, std::uint32_t participants,
                                std::span<const float> model, float clip_bound,
                                std::span<const float> control) {
  const wire::PayloadMessage message = wire::PayloadMessage::ModelBroadcast(
      {wire::BroadcastContent::kModel, participants, clip_bound});
  EDGESGD_TRY_ASSIGN(
      const PayloadSpans spans,
      model_builder_->BeginPayloadFrame(NextHeader(round), message, ModelCodec(), config_->layout));
  std::copy(model.begin(), model.end(), spans.values.begin());
  if (!control.empty()) {
    const Result<PayloadSpans> reserved =
        model_builder_->ReserveControlPayload(ModelCodec(), config_->layout);
    if (!reserved.ok()) {
      model_builder_->AbandonPayloadFrame();
      return reserved.status();
    }
    std::copy(control.begin(), control.end(), reserved.value().values.begin());
  }
  EDGESGD_TRY_ASSIGN(model_frame_, model_builder_->FinishPayloadFrame());
  return Status::Ok();
}

Result<PayloadSpans> ServerOutbox::BeginAggregate(std::uint32_t round, std::uint32_t participants,
                                                  float clip_bound) {
  const wire::PayloadMessage message = wire::PayloadMessage::ModelBroadcast(
      {wire::BroadcastContent::kAggregate, participants, clip_bound});
  return aggregate_builder_->BeginPayloadFrame(NextHeader(round), message, config_->codec,
                                               config_->layout);
}

Result<std::span<const std::byte>> ServerOutbox::FinishAggregate() {
  EDGESGD_TRY_ASSIGN(aggregate_frame_, aggregate_builder_->FinishPayloadFrame());
  return aggregate_frame_;
}

void ServerOutbox::AbandonAggregate() { aggregate_builder_->AbandonPayloadFrame(); }

bool ServerOutbox::BuildLeave(std::uint32_t round, wire::LeaveReason reason) {
  const Result<std::span<const std::byte>> leave =
      leave_builder_->EncodeLeave(NextHeader(round), wire::LeaveInfo{reason});
  leave_frame_ = leave.ok() ? leave.value() : std::span<const std::byte>();
  return leave.ok();
}

Result<std::span<const std::byte>> ServerOutbox::BuildControl(PeerId peer, Frame frame,
                                                              std::uint32_t round) {
  // A ring of builders: a frame handed out stays intact while the next few control frames are
  // built (one per call in practice, so a drained driver never sees it reused).
  wire::FrameBuilder& builder = *control_builders_[next_control_];
  next_control_ = (next_control_ + 1) % kControlSlots;
  if (frame == kWelcome) {
    return builder.EncodeWelcome(NextHeader(round), ToWelcomeInfo(*config_, peer, workers_));
  }
  const Entry& entry = entries_[peer];
  return builder.EncodeError(NextHeader(round),
                             wire::ErrorInfo{entry.refusal_code, entry.refusal_why});
}

Result<std::span<const std::byte>> ServerOutbox::BuildSecure(PeerId peer, std::uint32_t round) {
  if (secure_ == nullptr) return Status::FailedPrecondition("the run is not secure");
  // The message of the phase the round is in now: a device the server dropped gets none.
  EDGESGD_TRY_ASSIGN(const wire::SecureMessage message, secure_->MessageFor(peer));
  wire::FrameBuilder& builder = *secure_builders_[next_secure_];
  next_secure_ = (next_secure_ + 1) % kControlSlots;
  return builder.EncodeSecure(NextHeader(round), message);
}

bool ServerOutbox::PollFrame(std::uint32_t round, OutgoingFrame& out) {
  std::uint32_t visited = 0;
  while (owing_ > 0 && visited < workers_) {
    const PeerId peer = (cursor_ - 1 + visited) % workers_ + 1;
    Entry& entry = entries_[peer];
    if (entry.owed == 0) {
      ++visited;
      continue;
    }
    // Per worker, frames go out in protocol order: Welcome (or Error), broadcast, the secure
    // aggregation message, Leave.
    std::span<const std::byte> bytes;
    for (const Frame frame : {kWelcome, kRefusal, kBroadcast, kSecure, kLeave}) {
      if ((entry.owed & frame) == 0) continue;
      Forgive(peer, frame);
      if (frame == kWelcome || frame == kRefusal) {
        const Result<std::span<const std::byte>> built = BuildControl(peer, frame, round);
        if (built.ok()) bytes = built.value();
      } else if (frame == kSecure) {
        const Result<std::span<const std::byte>> built = BuildSecure(peer, round);
        if (built.ok()) bytes = built.value();
      } else if (frame == kBroadcast) {
        bytes = entry.aggregate ? aggregate_frame_ : model_frame_;
      } else {
        bytes = leave_frame_;
      }
      break;
    }
    if (bytes.empty()) continue;  // nothing could be built; look at this worker's next frame
    cursor_ = peer;
    out.to = peer;
    out.bytes = bytes;
    out.work_samples = 0;
    return true;
  }
  // Drained: the next batch goes out in peer order again (deterministic runs, and updates then
  // tend to arrive in peer order, which fixes the order of the float sums).
  cursor_ = 1;
  return false;
}

}  // namespace edgesgd::protocol
