// ServerSession checkpoints: SaveState/RestoreState round-trip the committed state (round, model,
// cumulative counters, the re-compressed downlink's residual), a restored server resumes at the
// saved round and finishes the run, and damaged or foreign checkpoints are refused with a reason
// (a foreign one naming the setting that differs), leaving the session untouched.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgesgd/protocol/checkpoint.h"
#include "edgesgd/secagg/signing.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

std::vector<std::byte> Save(const ServerSession& server) {
  std::vector<std::byte> bytes(server.StateBytes());
  const Result<std::size_t> written = server.SaveState(bytes);
  EXPECT_TRUE(written.ok());
  EXPECT_EQ(written.value(), bytes.size());
  return bytes;
}

// The settings of a server: its run configuration and worker count.
struct ServerSettings {
  RunConfig config;
  std::uint32_t workers = 4;
};

// Signed runs need a verifier; these servers never verify a signature.
class RefusingVerifier final : public secagg::Verifier {
 public:
  Status Verify(std::uint32_t, const secagg::Digest&, const secagg::Signature&) const override {
    return Status::Unauthenticated("this test's server checks no signature");
  }
};

// A server of `settings`, initialised (not started) with a constant model.
struct FreshServer {
  explicit FreshServer(const ServerSettings& settings)
      : storage(ServerSession::ArenaBytes(settings.config, Options(settings))) {
    const Status init = server.Init(storage.arena, AllCodecs(), settings.config, Options(settings),
                                    std::vector<float>(settings.config.layout.dimension(), 0.25f));
    EXPECT_TRUE(init.ok()) << init.reason();
  }
  static ServerOptions Options(const ServerSettings& settings) {
    ServerOptions options;
    options.workers = settings.workers;
    options.noise_key = {0x5EC2E7};  // a run with central noise needs one
    static const RefusingVerifier verifier;
    options.secure_verifier = &verifier;
    return options;
  }
  ArenaStorage storage;
  ServerSession server;
};

// A server of `config` with FourWorkers and a zero model, to restore a checkpoint into.
struct RestoringServer {
  explicit RestoringServer(const RunConfig& config)
      : storage(ServerSession::ArenaBytes(config, FourWorkers())) {
    const Status init = server.Init(storage.arena, AllCodecs(), config, FourWorkers(),
                                    std::vector<float>(config.layout.dimension()));
    EXPECT_TRUE(init.ok()) << init.reason();
  }
  ArenaStorage storage;
  ServerSession server;
};

// A checkpoint of a fresh server of `run`.
std::vector<std::byte> CheckpointOf(const ServerSettings& run) {
  const FreshServer fresh(run);
  return Save(fresh.server);
}

// Restores `checkpoint` into a fresh server of `run`; the setting the refusal names goes to
// `differing`.
Status RestoreInto(const ServerSettings& run, std::span<const std::byte> checkpoint,
                   std::string_view& differing) {
  FreshServer fresh(run);
  differing = {};
  return fresh.server.RestoreState(checkpoint, &differing);
}

TEST(ServerCheckpointTest, RestoredServerHoldsTheSavedRoundModelAndCounters) {
  constexpr std::size_t kDim = 16;
  const RunConfig config = MajorityConfig(kDim, 40);
  Cluster cluster(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 1.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilRound(12, 1000 * kSecond));
  ASSERT_FALSE(cluster.server().Finished());
  const std::vector<std::byte> state = Save(cluster.server());

  RestoringServer restoring(config);
  ServerSession& restored = restoring.server;
  const Status check = restored.RestoreState(state);
  ASSERT_TRUE(check.ok()) << check.reason();
  EXPECT_EQ(restored.round(), cluster.server().round());
  ASSERT_EQ(restored.model().size(), kDim);
  EXPECT_EQ(std::memcmp(restored.model().data(), cluster.server().model().data(), kDim * 4), 0);
  EXPECT_EQ(restored.counters().bytes_received, cluster.server().counters().bytes_received);
  EXPECT_EQ(restored.counters().rounds_completed, cluster.server().counters().rounds_completed);
  // Saving the restored state gives the same bytes.
  const std::vector<std::byte> again = Save(restored);
  ASSERT_EQ(again.size(), state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    ASSERT_EQ(again[i], state[i]) << "byte " << i;
  }
}

TEST(ServerCheckpointTest, ResumedServerFinishesTheRemainingRounds) {
  constexpr std::size_t kDim = 16;
  const RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 30);
  std::vector<std::byte> state;
  {
    Cluster first(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 2.0f));
    first.net().SetLatencyAll(kMs);
    first.Start();
    ASSERT_TRUE(first.RunUntilRound(20, 1000 * kSecond));
    ASSERT_EQ(first.server().round(), 20u);
    state = Save(first.server());
  }
  // A new cluster whose server resumes from the checkpoint: only rounds 20..29 remain.
  Cluster second(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 0.0f));
  ASSERT_TRUE(second.server().RestoreState(state).ok());
  second.net().SetLatencyAll(kMs);
  second.Start();
  ASSERT_TRUE(second.RunUntilFinished(1000 * kSecond));
  EXPECT_EQ(second.server().round(), 30u);
  EXPECT_EQ(second.server().counters().rounds_completed, 30u);
  const std::vector<RoundEvent> rounds = second.DrainRounds();
  ASSERT_EQ(rounds.size(), 10u);
  EXPECT_EQ(rounds.front().round, 20u);
}

// With stateless workers (no error feedback, no momentum) the server's downlink residual is the
// run's only state across rounds besides the model: a resumed run ends bit-identical to an
// uninterrupted one only if the checkpoint carried it.
TEST(ServerCheckpointTest, RecompressedDownlinkResidualSurvivesAResume) {
  constexpr std::size_t kDim = 24;
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 30);
  config.downlink = DownlinkKind::kAggregate;
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.momentum = 0.0f;
  ASSERT_TRUE(RecompressesDownlink(config));
  const std::vector<float> initial(kDim, 2.0f);
  const InterruptedRun run = RunWithCheckpointAt(config, initial, 12);
  const std::vector<std::byte>& state = run.checkpoint;
  // The checkpoint holds the model and the residual: d floats each.
  ASSERT_EQ(state.size(), CheckpointBytes(config, 4, 4 * kDim));
  CheckpointState stored;
  ASSERT_TRUE(ReadCheckpoint(state, config, 4, 4 * kDim, stored).ok());
  ASSERT_EQ(stored.aggregation.size(), 4 * kDim);
  std::vector<float> residual(kDim);
  std::memcpy(residual.data(), stored.aggregation.data(), 4 * kDim);
  EXPECT_TRUE(std::any_of(residual.begin(), residual.end(), [](float v) { return v != 0.0f; }))
      << "top_k of 25 % left nothing behind: the test would not see a lost residual";

  {
    Cluster restored(config, FourWorkers(), Targets(4, kDim), initial);
    ASSERT_TRUE(restored.server().RestoreState(state).ok());
    EXPECT_EQ(Save(restored.server()), state);
  }
  const std::vector<float> resumed = ResumeToEnd(config, initial, state);
  ASSERT_EQ(resumed.size(), kDim);
  EXPECT_EQ(std::memcmp(resumed.data(), run.final_model.data(), 4 * kDim), 0);

  // The same checkpoint does not fit a run that broadcasts the model, and says so.
  RunConfig model_downlink = config;
  model_downlink.downlink = DownlinkKind::kModel;
  Cluster other(model_downlink, FourWorkers(), Targets(4, kDim), initial);
  std::string_view differing;
  EXPECT_EQ(other.server().RestoreState(state, &differing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(differing, "downlink");
}

TEST(ServerCheckpointTest, DamagedOrForeignCheckpointsAreRefused) {
  constexpr std::size_t kDim = 8;
  const RunConfig config = MajorityConfig(kDim, 20);
  const std::vector<float> initial(kDim, 0.5f);
  ArenaStorage source_storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession source;
  ASSERT_TRUE(source.Init(source_storage.arena, AllCodecs(), config, FourWorkers(), initial).ok());
  const std::vector<std::byte> state = Save(source);

  std::string_view differing;  // the setting a refusal names
  const ServerSettings same{config, 4};
  const auto expect_damaged = [&](std::span<const std::byte> bytes, const char* what) {
    const Status check = RestoreInto(same, bytes, differing);
    EXPECT_EQ(check, Status::DataLoss()) << what;
    EXPECT_NE(std::string_view(check.reason()).find("damaged"), std::string_view::npos)
        << what << ": " << check.reason();
  };
  EXPECT_TRUE(RestoreInto(same, state, differing).ok());

  CheckpointState stored;
  ASSERT_TRUE(ReadCheckpoint(state, config, 4, 0, stored).ok());
  const auto model_offset = static_cast<std::size_t>(stored.model.data() - state.data());
  std::vector<std::byte> flipped = state;
  flipped[model_offset + 3] ^= std::byte{0x40};  // a model bit
  expect_damaged(flipped, "a flipped model bit");
  expect_damaged(std::span(state).first(state.size() - 1), "one byte short");
  expect_damaged(std::span(state).first(12), "the header only");
  expect_damaged(std::vector<std::byte>(state.size()), "zeros");

  // Another format version is refused as such, before anything else is read.
  for (const std::uint32_t version : {kCheckpointVersion - 1, kCheckpointVersion + 1}) {
    std::vector<std::byte> other_version = state;
    std::memcpy(other_version.data() + 8, &version, sizeof(version));  // after the magic
    const Status check = RestoreInto(same, other_version, differing);
    EXPECT_EQ(check, Status::DataLoss()) << version;
    EXPECT_NE(std::string_view(check.reason()).find("version"), std::string_view::npos)
        << check.reason();
  }

  RunConfig other_seed = config;
  other_seed.seed += 1;
  EXPECT_EQ(RestoreInto({other_seed, 4}, state, differing), Status::InvalidArgument());
  EXPECT_EQ(differing, "seed");
  EXPECT_EQ(RestoreInto({config, 3}, state, differing), Status::InvalidArgument());
  EXPECT_EQ(differing, "workers");
  EXPECT_EQ(RestoreInto({MajorityConfig(kDim + 1, 20), 4}, state, differing),
            Status::InvalidArgument());
  EXPECT_EQ(differing, "model");

  // Not after Start: the run has begun from another state.
  ArenaStorage storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession started;
  ASSERT_TRUE(started.Init(storage.arena, AllCodecs(), config, FourWorkers(), initial).ok());
  started.Start(0);
  EXPECT_EQ(started.RestoreState(state).code(), StatusCode::kFailedPrecondition);
}

// ---- A refused resume names the setting that differs ----

using FieldValues = std::vector<std::pair<std::string_view, std::uint64_t>>;

FieldValues FieldsOf(const ServerSettings& run) {
  FieldValues fields;
  ForEachRunConfigField(
      run.config, run.workers,
      [&fields](std::string_view name, std::uint64_t value) { fields.emplace_back(name, value); });
  return fields;
}

// The name of the first field whose value differs between `a` and `b` (as ReadCheckpoint
// compares them), or "" when none does.
std::string_view FirstDifference(const FieldValues& a, const FieldValues& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] != b[i]) return a[i].first;
  }
  return a.size() == b.size() ? std::string_view() : std::string_view("(count)");
}

bool Valid(const ServerSettings& run) {
  return run.workers >= 1 && ValidateRunConfig(run.config).ok() && ValidateServerChoices(run.config).ok();
}

// Candidate words for a codec parameter other than `word`, most plausible first.
std::vector<std::uint32_t> OtherWords(const CodecFieldValue& field) {
  switch (field.kind) {
    case ParamKind::kReal: {
      const float value = std::bit_cast<float>(field.word);
      return {std::bit_cast<std::uint32_t>(value * 0.5f),
              std::bit_cast<std::uint32_t>(value * 1.5f),
              std::bit_cast<std::uint32_t>(value + 0.25f)};
    }
    case ParamKind::kInteger:
      return {field.word + 1, field.word - 1};
    case ParamKind::kBitWidth:  // the next narrower or wider full level count
      return {field.word / 2, field.word * 2 + 1};
    case ParamKind::kChoice: {
      std::vector<std::uint32_t> others;
      for (std::uint32_t i = 0; i < field.choices.size(); ++i) {
        if (i != field.word) others.push_back(i);
      }
      return others;
    }
  }
  return {};
}

// `run` with the codec parameter `name` changed to a value that keeps the run valid.
std::optional<ServerSettings> WithOtherCodecParameter(const ServerSettings& run,
                                                      std::string_view name) {
  std::array<std::uint32_t, kMaxCodecParamWords> words{};
  const std::size_t count = ParamWords(run.config.codec, words);
  std::size_t index = 0;
  std::optional<ServerSettings> changed;
  ForEachParamField(run.config.codec, [&](const CodecFieldValue& field) {
    const std::size_t at = index++;
    if (field.name != name) return;
    for (const std::uint32_t other : OtherWords(field)) {
      if (other == words[at]) continue;  // half of a zero
      std::array<std::uint32_t, kMaxCodecParamWords> other_words = words;
      other_words[at] = other;
      const Result<CodecParams> params =
          ParamsFromWords(CodecIdOf(run.config.codec), std::span(other_words).first(count));
      if (!params.ok()) continue;
      ServerSettings candidate = run;
      candidate.config.codec = params.value();
      if (Valid(candidate)) {
        changed = candidate;
        return;
      }
    }
  });
  return changed;
}

// `run` with the setting `name` (of ForEachRunConfigField) changed so that the run stays valid,
// or nothing when the run admits no other value (a majority vote has one codec). Fails the test
// for a name it does not know: every field must be covered.
std::optional<ServerSettings> WithOtherValue(const ServerSettings& run, std::string_view name) {
  bool codec_parameter = false;
  ForEachParamField(run.config.codec,
                    [&](const CodecFieldValue& field) { codec_parameter |= field.name == name; });
  if (codec_parameter) return WithOtherCodecParameter(run, name);

  ServerSettings changed = run;
  RunConfig& c = changed.config;
  if (name == "workers") {
    ++changed.workers;
  } else if (name == "rounds") {
    ++c.rounds;
  } else if (name == "seed") {
    ++c.seed;
  } else if (name == "model") {
    c.layout = TensorLayout::Single(c.layout.dimension() + 1).value();
  } else if (name == "batch") {
    ++c.batch;
  } else if (name == "participation") {
    c.participation = c.participation == 1.0f ? 0.5f : 1.0f;
  } else if (name == "aggregate") {
    if (c.aggregation == AggregationKind::kMean) {
      // A vote needs plain signs, Signum and one gradient per round.
      c.aggregation = AggregationKind::kMajority;
      c.codec = SignParams{.scale = SignScale::kUnit};
      c.optimizer.kind = OptimizerKind::kSignum;
      c.feedback.local_steps = 1;
    } else {
      c.aggregation = AggregationKind::kMean;
    }
  } else if (name == "downlink") {
    c.downlink =
        c.downlink == DownlinkKind::kModel ? DownlinkKind::kAggregate : DownlinkKind::kModel;
  } else if (name == "tie") {
    c.tie_rule = c.tie_rule == TieRule::kPositive ? TieRule::kNegative : TieRule::kPositive;
  } else if (name == "codec") {
    for (CodecId id = 0; id < kCodecCount; ++id) {
      if (id == CodecIdOf(run.config.codec)) continue;
      c.codec = QuarterSparse(id);
      if (Valid(changed)) return changed;
    }
    return std::nullopt;
  } else if (name == "feedback") {
    c.feedback.kind =
        c.feedback.kind == FeedbackKind::kEf ? FeedbackKind::kSaef : FeedbackKind::kEf;
  } else if (name == "detach") {
    c.feedback.detach = c.feedback.detach > 0.5f ? 0.25f : c.feedback.detach + 0.25f;
  } else if (name == "local_steps") {
    ++c.feedback.local_steps;
  } else if (name == "prox_mu") {
    c.feedback.prox_mu += 0.5f;
  } else if (name == "optimizer") {
    c.optimizer.kind = c.optimizer.kind == OptimizerKind::kSignum ? OptimizerKind::kMomentum
                                                                  : OptimizerKind::kSignum;
  } else if (name == "lr") {  // whichever set the aggregation reads
    c.feedback.learning_rate *= 0.5f;
    c.optimizer.learning_rate *= 0.5f;
  } else if (name == "momentum") {
    const auto other = [](float momentum) { return momentum == 0.0f ? 0.5f : momentum * 0.5f; };
    c.feedback.momentum = other(c.feedback.momentum);
    c.optimizer.momentum = other(c.optimizer.momentum);
  } else if (name == "weight_decay") {
    c.feedback.weight_decay += 1e-3f;
    c.optimizer.weight_decay += 1e-3f;
  } else if (name == "dp_mode") {
    // Central noise where the component adds it, else noise shares on the devices.
    const bool central = KnownAggregations::AddsCentralNoise(c);
    c.privacy.mode = c.privacy.mode != PrivacyMode::kOff ? PrivacyMode::kOff
                     : central                           ? PrivacyMode::kCentral
                                                         : PrivacyMode::kDistributed;
  } else if (name.starts_with("dp_")) {
    // Read only with privacy on: a run without it has one value of each.
    if (c.privacy.mode == PrivacyMode::kOff) return std::nullopt;
    PrivacyParams& p = c.privacy;
    if (name == "dp_clip") p.clip *= 2.0f;
    if (name == "dp_noise_multiplier") p.noise_multiplier += 0.5f;
    if (name == "dp_delta") p.delta *= 0.5f;
    if (name == "dp_target_quantile") {
      p.target_quantile = p.target_quantile == 0.5f ? 0.7f : 0.5f;
      p.count_noise = std::max(p.count_noise, p.noise_multiplier);  // adaptive needs count noise
    }
    // Adaptive clipping's rate and count noise are read only when the bound adapts.
    if ((name == "dp_clip_lr" || name == "dp_count_noise") && p.target_quantile == 0.0f) {
      return std::nullopt;
    }
    if (name == "dp_clip_lr") p.clip_learning_rate *= 0.5f;
    if (name == "dp_count_noise") p.count_noise += 1.0f;
  } else if (name == "robust") {
    c.robust.rule = c.robust.rule == RobustRule::kNone ? RobustRule::kMedian : RobustRule::kNone;
  } else if (name.starts_with("robust_")) {
    // Each is read by some rules only: recorded at its default for the others.
    RobustParams& r = c.robust;
    const bool sized_by_f = r.rule == RobustRule::kTrimmedMean || r.rule == RobustRule::kMultiKrum;
    const bool clips = r.rule == RobustRule::kCenteredClipping;
    if (name == "robust_f" && !sized_by_f) return std::nullopt;
    if (name != "robust_f" && !clips) return std::nullopt;
    if (name == "robust_f") r.byzantine = r.byzantine == 0 ? 1 : 0;
    if (name == "robust_clip_radius") r.clip_radius *= 2.0f;
    if (name == "robust_clip_iterations") ++r.clip_iterations;
  } else if (name == "server_optimizer") {
    ServerOptimizerParams& o = c.server_optimizer;
    o.kind = o.kind == ServerOptimizerKind::kFedAvg ? ServerOptimizerKind::kFedAdam
                                                    : ServerOptimizerKind::kFedAvg;
  } else if (name.starts_with("server_")) {
    // beta1, beta2 and tau are read by some optimizers only: recorded at their defaults for
    // the others.
    ServerOptimizerParams& o = c.server_optimizer;
    if (name == "server_beta1" && o.kind == ServerOptimizerKind::kFedAvg) return std::nullopt;
    if (name == "server_beta2" && !ReadsBeta2(o.kind)) return std::nullopt;
    if (name == "server_tau" && !IsAdaptive(o.kind)) return std::nullopt;
    if (name == "server_lr") o.learning_rate *= 0.5f;
    if (name == "server_beta1") o.beta1 *= 0.5f;
    if (name == "server_beta2") o.beta2 *= 0.5f;
    if (name == "server_tau") o.tau *= 2.0f;
  } else if (name == "buffer") {
    c.async.buffer = IsAsynchronous(c.async) ? 0 : 2;
  } else if (name == "staleness" || name == "staleness_exponent" || name == "max_staleness") {
    // Read by asynchronous runs only; the exponent by the polynomial only.
    AsyncParams& a = c.async;
    if (!IsAsynchronous(a)) return std::nullopt;
    if (name == "staleness_exponent" && a.staleness != StalenessKind::kPolynomial) {
      return std::nullopt;
    }
    if (name == "staleness") {
      a.staleness = a.staleness == StalenessKind::kConstant ? StalenessKind::kInverseSqrt
                                                            : StalenessKind::kConstant;
    }
    if (name == "staleness_exponent") a.exponent *= 2.0f;
    if (name == "max_staleness") ++a.max_staleness;
  } else if (name == "scaffold") {
    c.scaffold = !c.scaffold;
  } else if (name == "secure_aggregation") {
    c.secure.enabled = !c.secure.enabled;
  } else if (name.starts_with("secagg_")) {
    // Read only with secure aggregation on: a run without it has one value of each.
    SecureAggregationParams& a = c.secure;
    if (!a.enabled) return std::nullopt;
    if (name == "secagg_threshold") a.threshold = a.threshold == 0.75f ? 0.9f : 0.75f;
    if (name == "secagg_neighbours") a.neighbours += 2;
    if (name == "secagg_bound") a.bound *= 2.0f;
    if (name == "secagg_signed") a.signed_rounds = !a.signed_rounds;
  } else if (name == "aggregation_options") {
    // The lowest option's bit stands for all of them.
    if (kAggregationOptionBits == 0) return std::nullopt;
    c.aggregation_options ^= kAggregationOptionBits & (~kAggregationOptionBits + 1);
  } else {
    ADD_FAILURE() << "no way to change the setting " << name;
    return std::nullopt;
  }
  if (!Valid(changed)) return std::nullopt;
  return changed;
}

// For a run of every aggregation component, and a mean run of every codec (and qsgd's dq
// schedule), each setting the checkpoint records is changed in turn: resuming the original's
// checkpoint with the changed run is refused, naming that setting.
TEST(ServerCheckpointTest, AResumeWithAnySettingChangedNamesTheSetting) {
  constexpr std::size_t kDim = 16;
  struct Case {
    std::string_view component;
    RunConfig config;
    std::vector<std::string_view> fixed;  // settings with one valid value in this run
  };
  std::vector<Case> cases;
  // Privacy is off in these runs, so its parameters have one value; a run can add no privacy
  // where no noise mode fits it.
  const std::vector<std::string_view> privacy_off{"dp_clip",        "dp_noise_multiplier",
                                                  "dp_delta",       "dp_target_quantile",
                                                  "dp_clip_lr",     "dp_count_noise"};
  const auto with = [](std::vector<std::string_view> names, std::vector<std::string_view> more) {
    names.insert(names.end(), more.begin(), more.end());
    return names;
  };
  // Without a robust rule its parameters have one value each.
  const std::vector<std::string_view> robust_params{"robust_f", "robust_clip_radius",
                                                    "robust_clip_iterations"};
  // FedAvg reads neither moments nor tau; without the mean of the model downlink the server
  // moves the model by the plain aggregate alone.
  const std::vector<std::string_view> fedavg{"server_beta1", "server_beta2", "server_tau"};
  const std::vector<std::string_view> no_server_optimizer{"server_optimizer", "server_lr",
                                                          "server_beta1", "server_beta2",
                                                          "server_tau"};
  for (const auto& [component, config] : ConfigPerAggregation(kDim, 10)) {
    // A majority vote admits one codec (plain signs), one local step and the Signum optimizer;
    // a re-compressed aggregate takes neither central nor distributed noise.
    // A robust rule replaces the mean of the model downlink, without privacy: the other
    // components admit none, and a robust run no other aggregation, downlink or privacy.
    std::vector<std::string_view> fixed;
    if (component == "majority_vote") {
      fixed = {"codec", "sign_scale", "local_steps", "prox_mu", "optimizer"};
    }
    if (component == "robust_mean" || component == "scaffold") fixed = {"aggregate", "downlink"};
    // FedNova normalizes plain SGD's steps of the model downlink, and takes no privacy.
    if (component == "fednova") fixed = {"aggregate", "downlink", "momentum", "dp_mode"};
    if (component == "majority_vote" || component == "recompressed_mean" ||
        component == "robust_mean" || component == "scaffold") {
      fixed.push_back("dp_mode");
    }
    if (component == "robust_mean") {
      cases.push_back({component, config,
                       with(with(with(fixed, privacy_off), {"robust_clip_radius",
                                                            "robust_clip_iterations"}),
                            fedavg)});
      continue;
    }
    if (component != "mean") fixed = with(with(fixed, privacy_off), {"robust"});
    else fixed = with(fixed, privacy_off);
    const bool optimizes = component == "mean" || component == "scaffold" || component == "fednova";
    cases.push_back({component, config,
                     with(with(fixed, robust_params), optimizes ? fedavg : no_server_optimizer)});
  }
  RunConfig clipping = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  clipping.robust = RobustParams{.rule = RobustRule::kCenteredClipping, .clip_radius = 0.5f};
  cases.push_back({"robust_mean", clipping,
                   with(with(with({"aggregate", "downlink", "dp_mode"}, privacy_off), {"robust_f"}),
                        fedavg)});
  // Every server optimizer field is read by FedYogi.
  RunConfig yogi = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  yogi.server_optimizer = ServerOptimizerParams{.kind = ServerOptimizerKind::kFedYogi,
                                                .learning_rate = 0.01f};
  cases.push_back({"mean", yogi, with(with({"aggregate", "downlink"}, privacy_off), robust_params)});
  for (CodecId id = 0; id < kCodecCount; ++id) {
    // reg_top_k's payloads neither sum nor can the server re-compress them: model downlink only.
    std::vector<std::string_view> fixed;
    if (id == kCodecId<RegTopKCodec>) fixed.push_back("downlink");
    // Stochastic rounding can lengthen a clipped update: no privacy.
    if (!KeepsNormBound(QuarterSparse(id))) fixed.push_back("dp_mode");
    cases.push_back({"mean", MeanConfig(kDim, id, 10),
                     with(with(with(fixed, privacy_off), robust_params), fedavg)});
  }
  RunConfig central = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  central.privacy = PrivacyParams{.mode = PrivacyMode::kCentral, .clip = 0.5f};
  RunConfig adaptive = central;  // clipping to the median update norm
  adaptive.privacy.target_quantile = 0.5f;
  adaptive.privacy.count_noise = 1.0f;
  // Central noise rules out a vote and a re-compressed (top_k) aggregate downlink.
  // Privacy rules out a robust rule as well.
  cases.push_back({"mean", central,
                   with(with({"aggregate", "downlink", "dp_clip_lr", "dp_count_noise", "robust"},
                             robust_params),
                        fedavg)});
  cases.push_back({"mean", adaptive,
                   with(with({"aggregate", "downlink", "robust"}, robust_params), fedavg)});
  RunConfig dq = MeanConfig(kDim, kCodecId<QsgdCodec>, 10);
  dq.codec = QsgdParams{.schedule = QuantScheduleKind::kDq};
  cases.push_back({"mean", dq, with(with(with({"dp_mode"}, privacy_off), robust_params), fedavg)});

  // Synchronous runs record the staleness settings at their defaults, and only a mean of the
  // model downlink without a robust rule or privacy can become asynchronous.
  for (Case& test : cases) {
    if (test.component != "mean" || test.config.privacy.mode != PrivacyMode::kOff) {
      test.fixed.push_back("buffer");
    }
    test.fixed = with(test.fixed, {"staleness", "staleness_exponent", "max_staleness"});
    // SCAFFOLD needs several local steps, and the other runs take one (a vote, one gradient).
    if (test.component != "scaffold") test.fixed.push_back("scaffold");
    // Secure aggregation is off in these runs, so its parameters have one value; it can be
    // turned on for a majority vote, and for a mean of shared coordinates (identity,
    // random_block, rand_k) without a robust rule, asynchronous rounds or adaptive clipping.
    const bool can_secure =
        test.component == "majority_vote" ||
        (test.component == "mean" && TraitsOf(test.config.codec).payload_sum &&
         test.config.robust.rule == RobustRule::kNone && !IsAsynchronous(test.config.async) &&
         !AdaptsClipping(test.config.privacy));
    if (!can_secure) test.fixed.push_back("secure_aggregation");
    test.fixed = with(test.fixed,
                      {"secagg_threshold", "secagg_neighbours", "secagg_bound", "secagg_signed"});
    // The workers of the other runs use momentum, and no aggregation option admits it.
    if (test.component != "fednova") test.fixed.push_back("aggregation_options");
  }
  // Every secure aggregation field is read with it on; the mean admits no other downlink, robust
  // rule, asynchronous rounds or control variates (a majority vote it does).
  RunConfig secure = MeanConfig(kDim, kCodecId<RandomBlockCodec>, 10);
  secure.secure = SecureAggregationParams{.enabled = true, .neighbours = 2};
  cases.push_back(
      {"mean", secure,
       with(
           with(with(with({"downlink"}, privacy_off), with({"robust"}, robust_params)),
                fedavg),
           {"buffer", "staleness", "staleness_exponent", "max_staleness", "scaffold",
            "aggregation_options"})});
  // Every asynchronous field is read with the polynomial; the run admits no other aggregation,
  // downlink, privacy, robust rule or control variates.
  RunConfig buffered = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  buffered.async = AsyncParams{.buffer = 2, .staleness = StalenessKind::kPolynomial};
  cases.push_back({"mean", buffered,
                   with(with(with({"aggregate", "downlink", "dp_mode"}, privacy_off),
                             with({"robust"}, robust_params)),
                        with(fedavg, {"scaffold", "secure_aggregation", "secagg_threshold",
                                      "secagg_neighbours", "secagg_bound", "secagg_signed",
                                      "aggregation_options"}))});

  // FedProx's mu shapes several local steps: a mean of one local step refuses every other value
  // (majority vote's cases list it already). It follows the aggregation and downlink fields.
  for (Case& test : cases) {
    if (test.component == "majority_vote" || test.config.feedback.local_steps >= 2) continue;
    const auto after = std::find_if(test.fixed.begin(), test.fixed.end(), [](std::string_view name) {
      return name != "aggregate" && name != "downlink";
    });
    test.fixed.insert(after, "prox_mu");
  }

  for (const Case& test : cases) {
    const ServerSettings original{test.config, 4};
    SCOPED_TRACE(std::string(test.component) + " with " +
                 std::string(CodecName(test.config.codec)));
    ASSERT_TRUE(Valid(original));
    const AggregationDescriptor* aggregation = FindAggregation(test.config);
    ASSERT_NE(aggregation, nullptr);
    EXPECT_EQ(aggregation->name, test.component);
    const std::vector<std::byte> checkpoint = CheckpointOf(original);
    const FieldValues fields = FieldsOf(original);

    std::vector<std::string_view> unchangeable;
    for (const auto& [name, value] : fields) {
      SCOPED_TRACE(std::string(name));
      const std::optional<ServerSettings> changed = WithOtherValue(original, name);
      if (!changed.has_value()) {
        unchangeable.push_back(name);
        continue;
      }
      ASSERT_EQ(FirstDifference(fields, FieldsOf(*changed)), name);
      std::string_view differing;
      EXPECT_EQ(RestoreInto(*changed, checkpoint, differing), Status::InvalidArgument());
      EXPECT_EQ(differing, name);
    }
    EXPECT_EQ(unchangeable, test.fixed);
    // Unchanged, the checkpoint restores.
    std::string_view differing;
    EXPECT_TRUE(RestoreInto(original, checkpoint, differing).ok());
  }
}

TEST(ServerCheckpointTest, CheckpointOfAFinishedRunRestoresAsFinished) {
  constexpr std::size_t kDim = 8;
  const RunConfig config = MajorityConfig(kDim, 5);
  Cluster cluster(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 1.0f));
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  const std::vector<std::byte> state = Save(cluster.server());
  RestoringServer restoring(config);
  ServerSession& restored = restoring.server;
  ASSERT_TRUE(restored.RestoreState(state).ok());
  EXPECT_TRUE(restored.Finished());
  EXPECT_EQ(restored.round(), 5u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
