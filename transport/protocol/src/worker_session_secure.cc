// The worker's side of secure aggregation (RunConfig::secure): its device stage and frame
// builder, the round's keys once the update chain has masked its input (worker_stages/masking.cc),
// and the answers to the server's phase messages. worker_session.cc's Configure, ComputeUpdate
// and DoFrame hand over here.

#include <new>
#include <type_traits>

#include "edgesgd/protocol/worker_session.h"
#include "session_util.h"
#include "worker_stages/update_stage.h"

namespace edgesgd::protocol {

using internal::SecureDevice;

const secagg::DeviceStage* WorkerSession::secure_stage() const {
  return secure_ != nullptr ? &secure_->stage : nullptr;
}

Status WorkerSession::ConfigureSecure(const RunConfig& config, std::uint32_t workers) {
  Arena& arena = *arena_;
  // Never destroyed, like every arena object: the stage is trivially destructible and the
  // builder writes into arena memory it does not own.
  static_assert(alignof(SecureDevice) <= kArenaAlignment &&
                std::is_trivially_destructible_v<secagg::DeviceStage>);
  EDGESGD_TRY_ASSIGN(const std::span<std::byte> storage, arena.AllocateBytes(sizeof(SecureDevice)));
  auto* secure = ::new (static_cast<void*>(storage.data())) SecureDevice();
  if (config.aggregation == AggregationKind::kMajority) {
    secure->lane_bits = SecureVoteLaneBits(workers);
  } else if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    EDGESGD_TRY_ASSIGN(secure->levels,
                       secagg::ChooseSharedScaleLevels(qsgd->shared_scale, qsgd->levels, workers));
  } else {
    EDGESGD_TRY_ASSIGN(secure->format, SecureFixedPoint(config.secure, workers));
  }
  EDGESGD_TRY(
      secure->stage.Init(arena, SecureLimits(config, workers, options_.secure_minimum_neighbours)));
  if (config.secure.signed_rounds) EDGESGD_TRY(secure->stage.SetSigning(options_.secure_signing));
  EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer,
                     arena.AllocateBytes(BuilderBytesFor(SecureUplinkFrameBytes(config, workers))));
  secure->builder.emplace(buffer);
  secure_ = secure;
  return Status::Ok();
}

secagg::DeviceStageLimits WorkerSession::SecureLimits(const RunConfig& config,
                                                      std::uint32_t workers,
                                                      std::uint32_t minimum_neighbours) {
  secagg::DeviceStageLimits limits;
  limits.client.max_neighbours = MaxSecureNeighbours(config.secure, workers);
  limits.client.minimum_neighbours = minimum_neighbours;
  limits.words = static_cast<std::uint32_t>(SecureInputWords(config, workers));
  return limits;
}

std::size_t WorkerSession::SecureArenaBytes(const RunConfig& config, std::uint32_t workers) {
  const std::size_t frame = SecureUplinkFrameBytes(config, workers);
  const secagg::DeviceStageLimits limits = SecureLimits(config, workers, 1);
  if (frame == 0 || limits.words == 0 || limits.client.max_neighbours == 0) return 0;
  return edgesgd::ArenaBytes(sizeof(SecureDevice)) + secagg::DeviceStage::ArenaBytes(limits) +
         edgesgd::ArenaBytes(BuilderBytesFor(frame));
}

Status WorkerSession::StartSecureRound(std::uint32_t round) {
  secagg::Key entropy{};
  if (const Status drawn = options_.secure_entropy(options_.user, round, entropy); !drawn.ok()) {
    ++counters_.secure_errors;
    return drawn;
  }
  const Result<wire::SecureMessage> keys = secure_->stage.StartWithInput(round, id_, entropy);
  entropy.fill(std::byte{0});
  if (!keys.ok()) {
    ++counters_.secure_errors;
    return keys.status();
  }
  const Result<std::span<const std::byte>> frame =
      secure_->builder->EncodeSecure(NextHeader(round), keys.value());
  if (!frame.ok()) {
    ++counters_.encode_errors;
    return frame.status();
  }
  update_frame_ = frame.value();
  secure_answered_ = kNoSecurePhase;
  return Status::Ok();
}

void WorkerSession::HandleSecure(const wire::FrameView& view) {
  const std::uint32_t round = view.header.round;
  const wire::SecureView* message = internal::SecureMessageOf(view.secure);
  // Only the round whose keys this worker sent, while it is still open.
  if (message == nullptr || round != update_round_ || update_frame_.empty()) {
    ++counters_.unexpected;
    return;
  }
  const auto phase = static_cast<std::uint8_t>(message->fields.phase);
  if (phase == secure_answered_) {
    // The server's message again (duplicated on the way): the answer may have been lost.
    pending_ = static_cast<std::uint8_t>(pending_ | kPendingUpdate);
    update_work_ = 0;
    ++counters_.updates_resent;
    return;
  }
  const Result<wire::SecureMessage> answer = secure_->stage.Handle(*message);
  counters_.secure_shares_unopened = secure_->stage.client().unopened_shares();
  if (!answer.ok()) {
    // Out of order, tampered or beyond this device's limits: the stage aborted its round.
    ++counters_.secure_errors;
    update_frame_ = {};
    pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingUpdate);
    return;
  }
  const Result<std::span<const std::byte>> frame =
      secure_->builder->EncodeSecure(NextHeader(round), answer.value());
  if (!frame.ok()) {
    ++counters_.encode_errors;
    secure_->stage.Abort();
    update_frame_ = {};
    return;
  }
  update_frame_ = frame.value();
  update_work_ = 0;
  secure_answered_ = phase;
  pending_ = static_cast<std::uint8_t>(pending_ | kPendingUpdate);
}

}  // namespace edgesgd::protocol
