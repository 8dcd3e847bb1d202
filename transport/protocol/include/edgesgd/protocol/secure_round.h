#pragma once

// The server's side of secure aggregation in a synchronous round (secure_aggregation.h). It owns
// the secagg::ServerStage, knows which participant sent which phase's message, and at the end
// turns the unmasked fixed-point sum back into a payload of the run's codec (qsgd: the unmasked
// level sums into d values), which it adds to the aggregation component in one call
// (Aggregation::AddSum), or, for majority vote, the unmasked lanes into each coordinate's count
// of +1 votes (Aggregation::AddVoteCounts). ServerSession decides when a phase closes (everyone
// still in the round answered, or the phase's deadline passed); the outbox builds each device's
// next message from MessageFor.
//
// Memory: everything from the arena at Init (ArenaBytes); nothing afterwards, except inside
// mbed TLS's key agreement when a dropped device's mask key is recovered (see secagg/crypto.h).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/result.h"
#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/secagg/fixed_point.h"
#include "edgesgd/secagg/frame_stage.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol {

class SecureRound {
 public:
  // The phases, in order; a device's message of a phase answers the server's message closing
  // the one before (the keys answer the model broadcast). Unsigned rounds skip the consistency
  // check.
  static constexpr std::uint8_t kKeys = 0;
  static constexpr std::uint8_t kShares = 1;
  static constexpr std::uint8_t kInputs = 2;
  static constexpr std::uint8_t kConsistency = 3;
  static constexpr std::uint8_t kUnmasking = 4;

  // The phase a device's message belongs to; kUnmasking + 1 for a message a device never sends.
  static std::uint8_t PhaseOf(wire::SecurePhase phase);

  // Exact arena bytes Init takes for a run of `config` with `workers` workers; 0 when it cannot
  // be sized (secure aggregation off, or a configuration ValidateRunConfig refuses).
  static std::size_t ArenaBytes(const RunConfig& config, std::uint32_t workers);

  // `verifier` checks the devices' signatures when the run signs its rounds
  // (SecureAggregationParams::signed_rounds); it must outlive the round.
  // Errors: kInvalidArgument (secure aggregation off, a bound too large for the worker count, a
  // signed run without a verifier); the arena's and the stage's.
  Status Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
              std::uint32_t workers, const secagg::Verifier* verifier);

  // Begins round `round` with `cohort` (its participants' peer ids), the SecAgg+ ring permuted
  // by `graph_seed`. Errors: why the round cannot be secured (fewer than two devices); the round
  // is then not open.
  Status Begin(std::uint32_t round, std::span<const std::uint32_t> cohort,
               std::uint64_t graph_seed);
  bool open() const { return open_; }
  std::uint8_t phase() const { return phase_; }

  // A participant's message. nullopt when it was accepted; otherwise why it is refused (nothing
  // of it is kept): kLate (it missed an earlier phase, or this one closed; fresh keys after the
  // keys phase also make the device leave the round: it restarted), kDuplicate,
  // kNotSelected (outside the cohort), kBadPayload (the stage refused it: tampered, replayed,
  // out of its limits), kUnexpectedMessage (no round open, or a phase a device never sends).
  std::optional<RejectReason> Add(PeerId peer, const wire::SecureView& message);

  // `peer` is still in the round and has not sent the current phase's message; after a Close,
  // that it is owed the next phase's message.
  bool Awaits(PeerId peer) const { return open_ && stage_->server().Expects(peer); }
  // The device's masked input is in the round's sum (meaningful from the unmasking on).
  bool Survived(PeerId peer) const { return stage_->server().Survived(peer); }

  // Closes the current phase. true when that was the unmasking and the sum is ready (AddSum);
  // false when the next phase begins. Errors: why the round is aborted (too many devices
  // vanished, a secret short of t shares); the round is then closed.
  Result<bool> Close();

  // The message `peer` is owed after the last Close. Errors: the stage's (kNotFound for a
  // device the server dropped from the round).
  Result<wire::SecureMessage> MessageFor(PeerId peer) { return stage_->MessageFor(peer); }

  // After Close returned true: decodes the survivors' sum into a payload of the run's codec (the
  // shared coordinates of the round, read off an encode of `model`) and adds it to
  // `aggregation` as the sum of that many updates (Aggregation::AddSum) — or, for majority
  // vote, unpacks each coordinate's count of +1 votes (Aggregation::AddVoteCounts). Returns the
  // survivor count; the round is then closed. Errors: the codec's or the component's.
  Result<std::uint32_t> AddSum(Aggregation& aggregation, std::span<const float> model);

  // Ends the round without a sum, wiping the stage's secrets.
  void Abort();

  // Bits of the masked inputs accepted so far this round (32 per word).
  std::uint64_t masked_bits() const { return masked_bits_; }
  // Devices that left a round because they restarted in it, since Init.
  std::uint64_t restarts_left() const { return restarts_left_; }
  const secagg::FixedPoint& format() const { return format_; }

 private:
  std::uint8_t Sent(PeerId peer) const {
    return peer < sent_.size() ? sent_[peer] : std::uint8_t{0};
  }

  const CodecRegistry* codecs_ = nullptr;
  const RunConfig* config_ = nullptr;
  secagg::ServerStage* stage_ = nullptr;  // in the arena
  secagg::FixedPoint format_;
  std::span<std::uint8_t> sent_;  // per peer id: phases whose message was accepted
  std::uint32_t words_ = 0;       // of every masked input
  // Mean: the sum payload's shared coordinates and values, and the codec's scratch for the
  // encode of the coordinates; qsgd: the lanes' format, and values_ the d summed values.
  secagg::SharedScaleLevels levels_;
  std::span<std::uint32_t> indices_;
  std::span<float> values_;
  std::span<std::byte> scratch_;
  // Majority vote: each lane's count of +1 votes, 32 lanes per sign word.
  std::span<std::uint32_t> counts_;
  std::uint32_t lane_bits_ = 0;
  std::uint32_t round_ = 0;
  std::uint8_t phase_ = kKeys;
  bool open_ = false;
  std::uint64_t masked_bits_ = 0;
  std::uint64_t restarts_left_ = 0;
};

}  // namespace edgesgd::protocol
