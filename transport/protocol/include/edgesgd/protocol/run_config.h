#pragma once

// What every participant of a parameter-server run shares: the model layout, the codec, the
// worker algorithm, the aggregation, the schedule and the seed. The server owns one RunConfig
// and hands it to every worker in its Welcome (ToWelcomeInfo / FromWelcomeInfo), so a worker
// needs to be told nothing but how to reach the server.

#include <bit>
#include <cstddef>
#include <cstdint>

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/majority_vote.h"
#include "edgesgd/core/optimizer.h"
#include "edgesgd/core/privacy/differential_privacy.h"
#include "edgesgd/core/robust_aggregator.h"
#include "edgesgd/core/scaffold.h"
#include "edgesgd/core/server_optimizer.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"
#include "edgesgd/protocol/buffered_async.h"
#include "edgesgd/protocol/secure_aggregation.h"
#include "edgesgd/secagg/lanes.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::protocol {

// How the server combines the round's updates (docs/algorithms.md).
enum class AggregationKind : std::uint8_t {
  kMean = 0,      // x -= mean_i C(p_i); workers run error feedback (ErrorFeedbackWorker)
  kMajority = 1,  // V = sign(sum_i sign(m_i)); x -= lr * (V + wd * x); workers run Signum
};

// What a round's ModelBroadcast carries to a worker that took part in the previous round.
enum class DownlinkKind : std::uint8_t {
  kModel = 0,      // the whole model (4d bytes) to every participant
  kAggregate = 1,  // the previous round's aggregate (a payload, or the 1-bit vote), which the
                   // worker applies to the model it already holds; the full model goes only to
                   // workers that cannot be known to hold the previous round's model. For a
                   // codec whose payloads do not sum, the aggregate is the mean compressed
                   // again with the same codec (see RecompressesDownlink)
};

struct RunConfig {
  TensorLayout layout;  // the model's tensors over one flat vector of layout.dimension() floats
  // The uplink codec and its parameters; with kMajority its vote form (VoteForm: plain signs).
  CodecParams codec;
  // The worker algorithm of kMean: EF / DEF / SAEF / none, lr, momentum, wd, local steps H.
  FeedbackParams feedback;
  AggregationKind aggregation = AggregationKind::kMean;
  TieRule tie_rule = TieRule::kPositive;  // kMajority: how an exact tie of votes resolves
  // The optimizer of kMajority: Signum (momentum = beta on the workers, lr and wd applied by
  // server and workers alike with the vote).
  OptimizerParams optimizer{OptimizerKind::kSignum, 1e-3f, 0.9f, 0.0f};
  std::uint32_t batch = 32;    // samples per local step; read by the gradient callback
  float participation = 1.0f;  // fraction P in (0, 1] of live workers sampled per round
  std::uint32_t rounds = 100;  // T >= 1
  std::uint64_t seed = 0;      // key of every shared random choice
  DownlinkKind downlink = DownlinkKind::kModel;
  // Differential privacy (kMean only): the clipping bound every worker applies, and who adds
  // the Gaussian noise (docs/privacy.md).
  PrivacyParams privacy;
  // A Byzantine-robust rule in place of the mean (kMean with the model downlink only). The
  // server's choice alone: workers run as for the mean, and the Welcome does not carry it.
  RobustParams robust;
  // How the server moves the model by the round's aggregate (kMean with the model downlink
  // only; FedAvg with learning rate 1 is x -= aggregate). The server's alone, like `robust`.
  ServerOptimizerParams server_optimizer;
  // Buffered asynchronous aggregation instead of synchronous rounds (buffered_async.h; kMean
  // with the model downlink only). The server's alone, like `robust`: a worker runs unchanged.
  AsyncParams async;
  // SCAFFOLD's control variates (core/scaffold.h; kMean with the model downlink only): workers
  // correct each local gradient by c - c_i and send the compressed change of c_i beside their
  // update, and the model broadcast carries the server's c.
  bool scaffold = false;
  // Secure aggregation (secure_aggregation.h; kMean with the model downlink and a codec that
  // sends shared coordinates as values, or kMajority): the server sees only the sum of each
  // round's updates, or each coordinate's count of +1 votes.
  SecureAggregationParams secure;
  // Aggregation components the server switches on by their flags, a bit each (AggregationOption
  // in aggregation.h). The server's alone, like `robust`.
  std::uint32_t aggregation_options = 0;

  friend constexpr bool operator==(const RunConfig&, const RunConfig&) = default;
};

// True when the server broadcasts its mean update compressed again with the workers' codec and
// keeps the rest in its own residual (DownlinkFeedback): mean aggregation, the aggregate
// downlink, and a codec without payload sums.
constexpr bool RecompressesDownlink(const RunConfig& config) {
  return config.aggregation == AggregationKind::kMean &&
         config.downlink == DownlinkKind::kAggregate && !TraitsOf(config.codec).payload_sum;
}

// Devices a round samples when `live` workers are reachable: round(P * live), at least one (none
// of none).
constexpr std::uint32_t SampledCount(float participation, std::uint32_t live) {
  if (live == 0) return 0;
  const double exact = static_cast<double>(participation) * live + 0.5;
  const auto take = static_cast<std::uint32_t>(exact);
  return take < 1 ? 1 : (take > live ? live : take);
}

// Bounds on the values that size a worker's work per frame. A worker takes them from the
// server's Welcome, so they are bounded like any input from the wire: without them one Welcome
// could make a worker compute for days inside a single OnFrame. They are generous for training
// (H = 4096 local steps, a batch of a million samples) and the server refuses larger flags.
inline constexpr std::uint32_t kMaxLocalSteps = 4096;
inline constexpr std::uint32_t kMaxBatch = 1u << 20;
// Local steps H times the batch: gradient samples a worker processes for one broadcast.
inline constexpr std::uint64_t kMaxSamplesPerRound = std::uint64_t{1} << 24;

// Checks everything a run needs before any memory is taken. Rules (each failure has its own
// reason): a non-empty layout whose dense model fits one frame; codec parameters valid for the
// codec (its descriptor's Validate) and its update frame within kMaxFrameBytes; rounds >= 1;
// batch in 1..kMaxBatch; participation in (0, 1]; known enums; for kMean, feedback parameters
// valid (lr > 0 finite, momentum in [0, 1), wd >= 0 finite, FedProx's mu >= 0 finite, detach in
// [0, 1] for DEF, local steps H in 1..kMaxLocalSteps with H * batch at most
// kMaxSamplesPerRound). Then the features the Welcome carries, each a component of its own
// (src/features/; docs/architecture.md): majority vote, the aggregate downlink, the proximal
// term, SCAFFOLD, differential privacy and secure aggregation. Each checks its own parameters
// and the features it excludes; a refusal names the settings by their --flags. Whether a
// secure sum fits 32 bits for the worker count (CheckSecureCohort) is checked where the count is
// known. Reads only `config`; does not allocate. Errors: kInvalidArgument.
Status ValidateRunConfig(const RunConfig& config);

// The server's checks of the features only it runs, components like those of ValidateRunConfig:
// the robust rule, the server optimizer (its parameters always, the rest unless plain FedAvg),
// buffered asynchronous aggregation and the aggregation options (CheckAggregationOptions). Apart from ValidateRunConfig because the Welcome carries
// none of them: a worker never has them to check, and its image links none of this. Does not
// allocate. Errors: kInvalidArgument.
Status ValidateServerChoices(const RunConfig& config);

// `config` with the parameters its aggregation does not use made equal to the ones it does
// (learning rate, momentum and weight decay live in `feedback` for kMean and in `optimizer` for
// kMajority; the wire carries one set), and the privacy parameters it does not read at their
// defaults (NormalizedPrivacyParams), and the robust rule and the server optimizer, which the
// Welcome does not carry, at their defaults. FromWelcomeInfo(ToWelcomeInfo(c)) ==
// NormalizedRunConfig(c) for every valid c. Does not allocate.
RunConfig NormalizedRunConfig(const RunConfig& config);

// ---- Every field of a run, named ----

// Calls f(name, value) for every setting that shapes a run of `config` with `workers` workers:
// the worker count, schedule and seed, the model's layout (as one hash of its tensor sizes), the
// aggregation, the codec and each of its parameters (named by its descriptor), and the worker
// algorithm with the learning rate, momentum and weight decay the aggregation reads. `name` (a
// std::string_view over a string literal) is the --flag of the setting with '_' for '-'
// ("k_ratio"), or "model" for the layout; `value` holds the setting's bits (a float's IEEE-754
// bits, an enum's number). A checkpoint stores them all, so a resumed run can name the setting that
// changed. Does not allocate.
template <typename F>
constexpr void ForEachRunConfigField(const RunConfig& config, std::uint32_t workers, F&& f) {
  const auto bits = [](float value) { return std::uint64_t{std::bit_cast<std::uint32_t>(value)}; };
  std::uint64_t layout_hash = 0xcbf29ce484222325ull;  // FNV-1a over the tensor sizes
  for (std::size_t t = 0; t < config.layout.tensor_count(); ++t) {
    layout_hash = (layout_hash ^ config.layout.size(t)) * 0x100000001b3ull;
  }
  const bool majority = config.aggregation == AggregationKind::kMajority;
  f("workers", std::uint64_t{workers});
  f("rounds", std::uint64_t{config.rounds});
  f("seed", config.seed);
  f("model", layout_hash);
  f("batch", std::uint64_t{config.batch});
  f("participation", bits(config.participation));
  f("aggregate", static_cast<std::uint64_t>(config.aggregation));
  f("downlink", static_cast<std::uint64_t>(config.downlink));
  f("tie", static_cast<std::uint64_t>(config.tie_rule));
  f("codec", std::uint64_t{CodecIdOf(config.codec)});
  ForEachParamField(config.codec, [&f](const CodecFieldValue& field) {
    f(field.name, std::uint64_t{field.word});
  });
  f("feedback", static_cast<std::uint64_t>(config.feedback.kind));
  f("detach", bits(config.feedback.detach));
  f("local_steps", std::uint64_t{config.feedback.local_steps});
  f("prox_mu", bits(config.feedback.prox_mu));
  f("optimizer", static_cast<std::uint64_t>(config.optimizer.kind));
  f("lr", bits(majority ? config.optimizer.learning_rate : config.feedback.learning_rate));
  f("momentum", bits(majority ? config.optimizer.momentum : config.feedback.momentum));
  f("weight_decay", bits(majority ? config.optimizer.weight_decay : config.feedback.weight_decay));
  // Parameters the run does not read are recorded at their defaults.
  const PrivacyParams privacy = NormalizedPrivacyParams(config.privacy);
  f("dp_mode", static_cast<std::uint64_t>(privacy.mode));
  f("dp_clip", bits(privacy.clip));
  f("dp_noise_multiplier", bits(privacy.noise_multiplier));
  f("dp_delta", bits(privacy.delta));
  f("dp_target_quantile", bits(privacy.target_quantile));
  f("dp_clip_lr", bits(privacy.clip_learning_rate));
  f("dp_count_noise", bits(privacy.count_noise));
  const RobustParams robust = NormalizedRobustParams(config.robust);
  f("robust", static_cast<std::uint64_t>(robust.rule));
  f("robust_f", std::uint64_t{robust.byzantine});
  f("robust_clip_radius", bits(robust.clip_radius));
  f("robust_clip_iterations", std::uint64_t{robust.clip_iterations});
  const ServerOptimizerParams server = NormalizedServerOptimizerParams(config.server_optimizer);
  f("server_optimizer", static_cast<std::uint64_t>(server.kind));
  f("server_lr", bits(server.learning_rate));
  f("server_beta1", bits(server.beta1));
  f("server_beta2", bits(server.beta2));
  f("server_tau", bits(server.tau));
  const AsyncParams async = NormalizedAsyncParams(config.async);
  f("buffer", std::uint64_t{async.buffer});
  f("staleness", static_cast<std::uint64_t>(async.staleness));
  f("staleness_exponent", bits(async.exponent));
  f("max_staleness", std::uint64_t{async.max_staleness});
  f("scaffold", std::uint64_t{config.scaffold});
  const SecureAggregationParams secure = NormalizedSecureParams(config.secure);
  f("secure_aggregation", std::uint64_t{secure.enabled});
  f("secagg_threshold", bits(secure.threshold));
  f("secagg_neighbours", std::uint64_t{secure.neighbours});
  f("secagg_bound", bits(secure.bound));
  f("secagg_signed", std::uint64_t{secure.signed_rounds});
  f("aggregation_options", std::uint64_t{config.aggregation_options});
}

// ---- The Welcome's encoding of a RunConfig ----
//
// wire::TrainingConfig carries one-byte kinds numbered by the layer that owns them: `feedback`
// is core's FeedbackKind, `optimizer` core's OptimizerKind, `mode` kServerMode, and
// `aggregate` is the protocol's combination of three choices, one bit each:
inline constexpr std::uint8_t kAggregateMajorityBit = 1;     // AggregationKind::kMajority
inline constexpr std::uint8_t kAggregateDownlinkBit = 2;     // DownlinkKind::kAggregate
inline constexpr std::uint8_t kAggregateTieNegativeBit = 4;  // TieRule::kNegative
inline constexpr std::uint8_t kServerMode = 0;  // TrainingConfig::mode: parameter server

// The Welcome a server sends worker `assigned_id` of `workers`. Reads only its arguments;
// does not allocate. `config` should be valid (ValidateRunConfig).
wire::WelcomeInfo ToWelcomeInfo(const RunConfig& config, std::uint32_t assigned_id,
                                std::uint32_t workers);

// The RunConfig a Welcome describes, into `out` (left unchanged on failure). Rejects kinds
// outside their enums, a mode other than kServerMode and gossip fields this protocol does not
// run, a worker count outside 1..kMaxWorkers, then applies ValidateRunConfig. Does not allocate.
// Errors: kInvalidArgument with a reason.
Status FromWelcomeInfo(const wire::WelcomeInfo& welcome, RunConfig& out);

// ---- Frame sizes of a run (0 for an invalid configuration) ----

// Codec parameters of the full-model broadcast: identity over the layout.
constexpr CodecParams ModelCodec() { return IdentityParams{}; }

// A frame of `codec` over the run's layout (MaxFrameBytes) with, for SCAFFOLD, the control
// payload it carries in the same codec (ControlPayloadBytes).
constexpr std::size_t FrameWithControlBytes(const RunConfig& config, const CodecParams& codec) {
  const std::size_t frame = wire::MaxFrameBytes(codec, config.layout);
  if (frame == 0 || !(kScaffold && config.scaffold)) return frame;
  const std::size_t control = wire::ControlPayloadBytes(EncodedShape(codec, config.layout).value());
  return control == 0 || frame + control > wire::kMaxFrameBytes ? 0 : frame + control;
}

// Largest Update frame (the uplink codec's payload, and SCAFFOLD's change of the control
// variate) and any control frame. Size a server's receive buffer with it.
constexpr std::size_t UpdateFrameBytes(const RunConfig& config) {
  return FrameWithControlBytes(config, config.codec);
}

// Largest model broadcast: the dense model, with SCAFFOLD's control variate.
constexpr std::size_t ModelFrameBytes(const RunConfig& config) {
  return FrameWithControlBytes(config, ModelCodec());
}

// Largest ModelBroadcast frame: the model or an aggregate (a payload of the uplink codec),
// whichever is larger. Size a worker's receive buffer with it.
constexpr std::size_t BroadcastFrameBytes(const RunConfig& config) {
  const std::size_t model = ModelFrameBytes(config);
  const std::size_t aggregate = wire::MaxFrameBytes(config.codec, config.layout);
  if (model == 0 || aggregate == 0) return 0;
  return model > aggregate ? model : aggregate;
}

// Secure majority vote: the bits of a lane that counts up to `workers` +1 votes exactly.
constexpr std::uint32_t SecureVoteLaneBits(std::uint32_t workers) {
  return static_cast<std::uint32_t>(std::bit_width(workers));
}

// Secure qsgd: the parameters of a run whose codec is qsgd, or nullptr.
constexpr const QsgdParams* SecureQsgdParams(const RunConfig& config) {
  return std::get_if<QsgdParams>(&config.codec);
}

// Secure qsgd (a shared scale, s levels): the bits of a lane that holds the sum of `workers`
// levels shifted into 0..2s; 0 when that sum does not fit 32 bits.
constexpr std::uint32_t SecureLevelLaneBits(std::uint32_t levels, std::uint32_t workers) {
  const std::uint64_t largest = std::uint64_t{2} * levels * workers;
  return largest == 0 || largest > 0xFFFFFFFFu
             ? 0
             : static_cast<std::uint32_t>(std::bit_width(largest));
}

// The words of a secure round's masked input in a run of `workers` workers: the payload's values
// in fixed point (mean), every coordinate's shifted qsgd level in a lane of SecureLevelLaneBits
// (qsgd), or every vote as 0 or 1 in a lane of SecureVoteLaneBits, 32 lanes per sign word
// (majority); whole lanes to a word; 0 without secure aggregation.
constexpr std::size_t SecureInputWords(const RunConfig& config, std::uint32_t workers) {
  if (!wire::kSecureAggregationFrames || !config.secure.enabled) return 0;
  if (config.aggregation == AggregationKind::kMajority) {
    return secagg::LaneWords(32 * MajorityVote::WordsFor(config.layout),
                             SecureVoteLaneBits(workers));
  }
  if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    return secagg::LaneWords(config.layout.dimension(), SecureLevelLaneBits(qsgd->levels, workers));
  }
  const Result<PayloadShape> shape = EncodedShape(config.codec, config.layout);
  return shape.ok() ? shape.value().values : 0;
}

// Whether a secure round of up to `workers` workers can sum without overflow: the fixed point
// keeps 8 fraction bits for the bound (SecureFixedPoint), or qsgd's lanes fit a word. Ok when
// secure aggregation is off. Errors: kInvalidArgument or kOutOfRange, naming the flag to change.
Status CheckSecureCohort(const RunConfig& config, std::uint32_t workers);

// Secure aggregation's largest frame from a device (its masked input, or its shares for a large
// neighbourhood) and from the server (a roster or the delivered shares) in a run of `workers`
// workers; 0 without secure aggregation.
constexpr std::size_t SecureUplinkFrameBytes(const RunConfig& config, std::uint32_t workers) {
  const std::size_t words = SecureInputWords(config, workers);
  return words == 0 ? 0
                    : wire::SecureFrameBytes(MaxSecureNeighbours(config.secure, workers), words, 0);
}
// A signed round sends each device the whole survivor set.
constexpr std::size_t SecureDownlinkFrameBytes(const RunConfig& config, std::uint32_t workers) {
  return wire::kSecureAggregationFrames && config.secure.enabled
             ? wire::SecureFrameBytes(MaxSecureNeighbours(config.secure, workers), 0,
                                      config.secure.signed_rounds ? workers : 0)
             : 0;
}

// Largest frame a server of `workers` workers receives (an Update, or a secure aggregation
// message) and a worker receives (a broadcast, or the server's secure aggregation message):
// size receive buffers with them.
constexpr std::size_t ServerReceiveFrameBytes(const RunConfig& config, std::uint32_t workers) {
  const std::size_t update = UpdateFrameBytes(config);
  const std::size_t secure = SecureUplinkFrameBytes(config, workers);
  return update > secure ? update : secure;
}
constexpr std::size_t WorkerReceiveFrameBytes(const RunConfig& config, std::uint32_t workers) {
  const std::size_t broadcast = BroadcastFrameBytes(config);
  const std::size_t secure = SecureDownlinkFrameBytes(config, workers);
  return broadcast > secure ? broadcast : secure;
}

// Buffer bytes of a FrameBuilder for frames of up to `frame_bytes` (0 stays 0).
constexpr std::size_t BuilderBytesFor(std::size_t frame_bytes) {
  return frame_bytes == 0 ? 0 : frame_bytes + wire::kBuilderScratchBytes;
}

}  // namespace edgesgd::protocol
