#pragma once

// The frames a parameter server owes its workers and has not handed to its driver yet. Per
// worker, in protocol order: a Welcome or an Error (a refused Join), the round's broadcast (the
// model, or the previous round's aggregate), the secure aggregation phase's message (built from
// the SecureRound when handed out), the final Leave. The outbox builds them — the
// shared model, aggregate and Leave frames once per round, Welcomes and Errors when handed out —
// and numbers every frame it builds (the envelope's sequence). ServerSession decides who is owed
// what; PollFrame hands the frames out one at a time. Memory: everything from the arena at Init.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/secure_round.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/frame_builder.h"

namespace edgesgd::protocol {

class ServerOutbox {
 public:
  // What a worker can be owed (bits of one byte).
  enum Frame : std::uint8_t {
    kWelcome = 1,
    kRefusal = 2,
    kBroadcast = 4,
    kLeave = 8,
    kSecure = 16,
  };

  // Welcome / Error frames that can be outstanding at once (one per PollFrame in practice).
  static constexpr std::size_t kControlSlots = 4;
  static constexpr std::size_t kControlBuilderBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;

  // Exact arena bytes Init takes for `workers` workers of a run of `config`, with a builder for
  // aggregate frames when `aggregate_frames` and, with secure aggregation, a ring of builders
  // for its messages; 0 when the configuration cannot be sized.
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t workers,
                                          bool aggregate_frames) {
    const std::size_t model_builder = BuilderBytesFor(ModelFrameBytes(config));
    if (model_builder == 0) return 0;
    std::size_t aggregate_builder = 0;
    if (aggregate_frames) {
      aggregate_builder = wire::FrameBuilderBytes(config.codec, config.layout);
      if (aggregate_builder == 0) return 0;
    }
    const std::size_t secure_builders =
        config.secure.enabled
            ? kControlSlots *
                  edgesgd::ArenaBytes(BuilderBytesFor(SecureDownlinkFrameBytes(config, workers)))
            : 0;
    return ArenaBytesFor<Entry>(std::size_t{workers} + 1) + edgesgd::ArenaBytes(model_builder) +
           (kControlSlots + 1) * edgesgd::ArenaBytes(kControlBuilderBytes) +
           (aggregate_frames ? edgesgd::ArenaBytes(aggregate_builder) : 0) + secure_builders;
  }

  // Takes the builders and the per-worker entries from the arena. `config` and `secure` (the
  // server's SecureRound with secure aggregation, else nullptr) must outlive the outbox.
  // Errors: the arena's (kFailedPrecondition, kResourceExhausted).
  Status Init(Arena& arena, const RunConfig& config, std::uint32_t workers, bool aggregate_frames,
              SecureRound* secure);

  // ---- What each worker is owed (peer ids 1..workers) ----
  void Owe(PeerId peer, std::uint8_t frames);
  void Forgive(PeerId peer, std::uint8_t frames);
  bool Owes(PeerId peer, Frame frame) const;
  // Owes `peer` the round's broadcast: the aggregate frame when `aggregate`, else the model.
  void OweBroadcast(PeerId peer, bool aggregate);
  // Owes `peer` an Error frame saying why its Join was refused (`why` a static string).
  void OweRefusal(PeerId peer, StatusCode code, const char* why);

  // ---- The shared frames of a round ----
  // Builds the broadcast of `model` for round `round`; `participants` is how many updates made
  // the change that led to it, `clip_bound` the round's adaptive clipping bound (0: none),
  // `control` SCAFFOLD's control variate c (empty without one). Errors: the builder's.
  Status BuildModel(std::uint32_t round, std::uint32_t participants, std::span<const float> model,
                    float clip_bound, std::span<const float> control);
  // Begins the aggregate frame of round `round` (applied by workers that hold round - 1's model)
  // and returns its payload spans for the aggregation component to fill; then Finish or
  // Abandon. Errors: the builder's.
  Result<PayloadSpans> BeginAggregate(std::uint32_t round, std::uint32_t participants,
                                      float clip_bound);
  Result<std::span<const std::byte>> FinishAggregate();
  void AbandonAggregate();
  // Builds the Leave that ends the run (then owed with Owe(peer, kLeave)). False when it cannot
  // be built.
  bool BuildLeave(std::uint32_t round, wire::LeaveReason reason);
  bool has_leave() const { return !leave_frame_.empty(); }

  // Hands out the next frame owed, round-robin across workers from where the last call left off
  // (per worker in protocol order); false when nothing is owed. Welcomes and Errors are built
  // here, for round `round`. The frame stays valid until the outbox builds the next shared frame
  // or kControlSlots more control frames.
  bool PollFrame(std::uint32_t round, OutgoingFrame& out);

  // The sequence number the next frame gets (a checkpoint saves and restores it).
  std::uint64_t sequence() const { return sequence_; }
  void set_sequence(std::uint64_t sequence) { sequence_ = sequence; }

 private:
  // Per worker, zero-initialised by the arena (hence no member initialisers).
  struct Entry {
    std::uint8_t owed;        // Frame bits
    bool aggregate;           // the broadcast owed is the aggregate frame
    StatusCode refusal_code;  // the Error owed
    const char* refusal_why;
  };

  wire::FrameHeader NextHeader(std::uint32_t round) {
    return wire::FrameHeader{kServerPeer, round, sequence_++};
  }
  // Builds the Welcome or Error owed to `peer` into the next control builder of the ring.
  Result<std::span<const std::byte>> BuildControl(PeerId peer, Frame frame, std::uint32_t round);
  // Builds the secure aggregation message owed to `peer` into the next builder of its ring.
  Result<std::span<const std::byte>> BuildSecure(PeerId peer, std::uint32_t round);

  const RunConfig* config_ = nullptr;
  std::uint32_t workers_ = 0;
  std::span<Entry> entries_;  // indexed by peer id; entry 0 (the server) is unused
  std::uint32_t owing_ = 0;   // workers owed anything
  PeerId cursor_ = 1;
  std::uint64_t sequence_ = 0;

  std::optional<wire::FrameBuilder> model_builder_;
  std::optional<wire::FrameBuilder> aggregate_builder_;
  std::optional<wire::FrameBuilder> leave_builder_;
  std::array<std::optional<wire::FrameBuilder>, kControlSlots> control_builders_;
  std::size_t next_control_ = 0;
  SecureRound* secure_ = nullptr;
  std::array<std::optional<wire::FrameBuilder>, kControlSlots> secure_builders_;
  std::size_t next_secure_ = 0;
  std::span<const std::byte> model_frame_;
  std::span<const std::byte> aggregate_frame_;
  std::span<const std::byte> leave_frame_;
};

}  // namespace edgesgd::protocol
