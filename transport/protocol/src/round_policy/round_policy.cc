#include "edgesgd/protocol/round_policy.h"

#include "../session_util.h"
#include "edgesgd/protocol/server_session.h"

namespace edgesgd::protocol {

Status RoundPolicy::Check(const RunConfig& /*config*/, const ServerOptions& /*options*/) const {
  return Status::Ok();
}

Status RoundPolicy::Init(Arena& /*arena*/, const CodecRegistry& /*codecs*/) { return Status::Ok(); }

std::optional<RejectReason> RoundPolicy::TakeSecureMessage(ServerWorkerSlot& /*slot*/,
                                                           const wire::FrameView& /*view*/) {
  return RejectReason::kUnexpectedMessage;
}

const RunConfig& RoundPolicy::config() const { return session_.config_; }
const ServerOptions& RoundPolicy::options() const { return session_.options_; }
std::uint32_t RoundPolicy::current_round() const { return session_.round_; }
std::span<ServerWorkerSlot> RoundPolicy::slots() const { return session_.slots_; }
std::span<std::uint32_t> RoundPolicy::candidates() const { return session_.candidates_; }
PeerId RoundPolicy::PeerOf(const ServerWorkerSlot& slot) const { return session_.PeerOf(slot); }
ServerOutbox& RoundPolicy::outbox() { return session_.outbox_; }
ServerCounters& RoundPolicy::counters() { return session_.counters_; }
std::uint32_t RoundPolicy::reported() const { return session_.reported_; }
void RoundPolicy::set_reported(std::uint32_t reported) { session_.reported_ = reported; }
void RoundPolicy::set_payload_bits(std::uint64_t bits) { session_.payload_bits_this_round_ = bits; }
Aggregation& RoundPolicy::aggregation() { return *session_.aggregation_; }
std::span<const float> RoundPolicy::model() const { return session_.model_; }

std::uint32_t RoundPolicy::LiveCount(bool selected_only, bool non_reporters_only) const {
  return session_.LiveCount(selected_only, non_reporters_only);
}

void RoundPolicy::Select(ServerWorkerSlot& slot, TimeNs now) { session_.Select(slot, now); }
void RoundPolicy::Resend(ServerWorkerSlot& slot, TimeNs now) { session_.Resend(slot, now); }

void RoundPolicy::AcceptUpdate(ServerWorkerSlot& slot, std::uint32_t round) {
  session_.AcceptUpdate(slot, round);
}

void RoundPolicy::CountExtension() {
  ++session_.counters_.deadline_extensions;
  ++session_.extensions_this_round_;
}

void RoundPolicy::CloseRound(TimeNs now) { session_.CloseRound(now, true); }

void RoundPolicy::AbortRound(TimeNs now, Status why) {
  session_.reported_ = 0;
  session_.abort_reason_this_round_ = why;
  session_.CloseRound(now, false);
}

void RoundPolicy::SelectSampledParticipants(TimeNs now) {
  const std::span<std::uint32_t> live = candidates();
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    ServerWorkerSlot& worker = SlotOf(peer);
    worker.selected = false;
    worker.reported = false;
    outbox().Forgive(peer, ServerOutbox::kBroadcast);
    if (worker.joined && worker.live) live[count++] = peer;
  }
  const std::span<const std::uint32_t> participants =
      SamplesPoisson() ? internal::SamplePoisson(live.first(count), config().participation,
                                                 options().noise_key, current_round())
                       : internal::SampleParticipants(live.first(count), config().participation,
                                                      config().seed, current_round());
  for (const std::uint32_t peer : participants) Select(SlotOf(peer), now);
}

bool RoundPolicy::SamplesPoisson() const { return IsPrivate(config().privacy); }

std::optional<RejectReason> RoundPolicy::RefuseOutsideCurrentRound(const ServerWorkerSlot& slot,
                                                                   std::uint32_t round) const {
  if (round != current_round()) {
    return round + 1 == current_round() ? RejectReason::kLate : RejectReason::kStale;
  }
  if (!slot.participates_in(round)) return RejectReason::kNotSelected;
  return std::nullopt;
}

}  // namespace edgesgd::protocol
