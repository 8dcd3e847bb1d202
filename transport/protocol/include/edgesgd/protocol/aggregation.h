#pragma once

// How a server combines a round's updates, as a component. ServerSession owns admission,
// rounds, deadlines and the broadcast; everything that depends on how updates are combined —
// what is kept per round, whether the next broadcast carries the aggregate instead of the model,
// how the round changes the model, and what must survive a restart — lives behind this
// interface, one component per way of combining (aggregation/*.h), each registered once in
// aggregation_registry.h. A new aggregator (robust, asynchronous, secure) is a new component:
// nothing else changes.
//
// A round, as the server drives it:
//   BeginRound(round)
//   Add(params, payload, context)        for every accepted update (or, with secure
//                                        aggregation, AddSum once for the round's sum)
//   if its aggregate is a payload (AggregationDescriptor::aggregate_is_payload):
//     FillBroadcast(spans, context)      into the next round's broadcast frame
//     Apply(that frame's payload, ...)   decoded from the frame, exactly as every worker will
//   else:
//     Apply({}, context, model)
// Components take all their memory from the arena when they are created and none afterwards.

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol {

class Aggregation {
 public:
  Aggregation(const Aggregation&) = delete;
  Aggregation& operator=(const Aggregation&) = delete;

  // Forgets the previous round's updates; `round` is the one starting (with asynchronous
  // aggregation, the model version an update's staleness is measured from). Does not allocate.
  virtual void BeginRound(std::uint32_t round) = 0;

  // Verifies and adds the payload of an accepted update, decoded with `params` (the run's codec
  // with the frame's own per-frame parameters, ParamsForPayload) in `context` (the sender's
  // round and id); `update` holds the Update's other fields. Errors (nothing is added):
  // kDataLoss or kInvalidArgument with the reason the payload cannot be aggregated. Does not
  // allocate.
  virtual Status Add(const CodecParams& params, const PayloadView& payload,
                     const CodecContext& context, const wire::UpdateInfo& update) = 0;

  // SCAFFOLD: Add for an update that carries the change of its device's control variate,
  // `control`, decoded with `control_params` in the same context. The update and its change are
  // added together or, on error, neither. Components without control variates refuse it
  // (kInvalidArgument). Does not allocate.
  virtual Status AddWithControl(const CodecParams& /*params*/, const PayloadView& /*payload*/,
                                const CodecParams& /*control_params*/,
                                const PayloadView& /*control*/, const CodecContext& /*context*/,
                                const wire::UpdateInfo& /*update*/) {
    return Status::InvalidArgument("this aggregation takes no control variates");
  }

  // Secure aggregation: adds `payload`, the sum of `contributions` updates that the server
  // never saw one by one (decoded with `params` in `context`), as that many updates. Components
  // that need each update on its own refuse it (kInvalidArgument). Does not allocate.
  virtual Status AddSum(const CodecParams& /*params*/, const PayloadView& /*payload*/,
                        const CodecContext& /*context*/, std::uint32_t /*contributions*/) {
    return Status::InvalidArgument("this aggregation needs each update on its own");
  }

  // Secure majority vote: `voters` devices' votes as each coordinate's count of +1 votes (32
  // lanes per sign word, MajorityVote::AddCounts). Components that count no votes refuse it
  // (kInvalidArgument). Does not allocate.
  virtual Status AddVoteCounts(std::span<const std::uint32_t> /*counts*/,
                               std::uint32_t /*voters*/) {
    return Status::InvalidArgument("this aggregation counts no votes");
  }

  // SCAFFOLD: the server's control variate c that this round's model broadcasts carry (d
  // floats); empty without control variates.
  virtual std::span<const float> ServerControl() const { return {}; }

  // Writes the round's aggregate into `out` (spans of EncodedShape(config.codec)). Called once
  // per closed round, only for a component whose aggregate is a payload. Errors: the aggregate
  // cannot be formed (kFailedPrecondition: no updates; the codec's error for a diverged run).
  virtual Status FillBroadcast(const PayloadSpans& out, const CodecContext& context) = 0;

  // Applies the closed round to `model`: from `broadcast`, the aggregate payload as decoded from
  // the frame FillBroadcast filled (so the server's model stays bit-identical to every
  // worker's), or, without an aggregate broadcast, from the component's own state (`broadcast`
  // empty). Errors as FillBroadcast.
  virtual Status Apply(const PayloadView& broadcast, const CodecContext& context,
                       std::span<float> model) = 0;

  // Adaptive clipping (docs/privacy.md): the bound workers clip this round's updates to, which
  // the round's model broadcasts announce, and the one the next round's take, from this round's
  // updates so far (what an aggregate broadcast built at the round's end announces). 0 when
  // workers clip to the run's fixed bound or not at all.
  virtual float ClipBound() const { return 0.0f; }
  virtual float NextClipBound(std::uint32_t /*round*/) const { return ClipBound(); }

  // The component's state across rounds, for checkpoints, as bytes in place (empty when it
  // keeps none; its size never changes after creation), and the restore of such bytes (at any
  // alignment), which checks them (kInvalidArgument with a reason for a wrong size or non-finite
  // values) and changes nothing on error.
  virtual std::span<const std::byte> SavedState() const { return {}; }
  virtual Status RestoreState(std::span<const std::byte> saved) {
    return saved.empty() ? Status::Ok()
                         : Status::InvalidArgument("this aggregation keeps no state");
  }

 protected:
  Aggregation() = default;
  // Components live in the arena and are never destroyed through this interface (no deleting
  // destructor, so the heap-free libraries reference no operator delete).
  ~Aggregation() = default;
};

// Declares, inside a component's class, its Init (what its descriptor's factory calls) and its
// overrides of the interface above.
#define EDGESGD_AGGREGATION_COMPONENT()                                                           \
  Status Init(Arena& arena, const AggregationSetup& setup);                                       \
  void BeginRound(std::uint32_t round) override;                                                  \
  Status Add(const CodecParams& params, const PayloadView& payload, const CodecContext& context,  \
             const wire::UpdateInfo& update) override;                                            \
  Status FillBroadcast(const PayloadSpans& out, const CodecContext& context) override;            \
  Status Apply(const PayloadView& broadcast, const CodecContext& context, std::span<float> model) \
      override

struct RunFeature;  // a run feature's rules (run_feature.h)

// A component a server switches on by a flag: the flag and its help (read by the CLI, which adds
// the flag, and so by its TOML keys), the component's bit in RunConfig::aggregation_options, and
// the run feature the component is — what it excludes and its own validation, which
// ValidateServerChoices applies. Such a component is registered once, in the aggregation list.
struct AggregationOption {
  const char* flag;  // "--name"
  const char* help;
  std::uint32_t bit;  // one bit, its own in the registry
  const RunFeature* feature;
};

// What creating a component needs.
struct AggregationSetup {
  const CodecRegistry* codecs = nullptr;
  const RunConfig* config = nullptr;
  std::uint32_t workers = 0;
  // The server's secret key for differential privacy's central noise (ServerOptions::noise_key).
  SecretKey noise_key{};
};

// One kind of aggregation: the configurations it serves, its exact memory, and its factory.
struct AggregationDescriptor {
  const char* name = "";
  // Whether the round's aggregate is a payload of the run's codec, which the server builds into
  // a broadcast frame and applies from that frame (FillBroadcast, then Apply). With the
  // aggregate downlink that frame is what workers holding the round's model receive instead of
  // the model.
  bool aggregate_is_payload = false;
  bool (*serves)(const RunConfig& config) = nullptr;
  // Arena bytes `create` takes (the component object included); 0 for a configuration it
  // cannot size.
  std::size_t (*arena_bytes)(const RunConfig& config, std::uint32_t workers) = nullptr;
  // Builds the component in the arena. Errors: those of its buffers' Init (kInvalidArgument,
  // kFailedPrecondition, kResourceExhausted).
  Result<Aggregation*> (*create)(Arena& arena, const AggregationSetup& setup) = nullptr;
  // The switch that selects it (T::kOption), or nullptr for one the run's other fields select.
  const AggregationOption* option = nullptr;
};

namespace internal {
// Places a component of type T in the arena and initialises it with `setup`.
template <typename T>
Result<Aggregation*> CreateInArena(Arena& arena, const AggregationSetup& setup) {
  static_assert(alignof(T) <= kArenaAlignment);
  EDGESGD_TRY_ASSIGN(const std::span<std::byte> storage, arena.AllocateBytes(sizeof(T)));
  T* component = ::new (static_cast<void*>(storage.data())) T();  // placement: no allocation
  EDGESGD_TRY(component->Init(arena, setup));
  return component;
}
}  // namespace internal

}  // namespace edgesgd::protocol
