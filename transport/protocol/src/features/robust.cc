// A Byzantine-robust rule in place of the mean (core/robust_aggregator.h). The server's choice
// alone: workers run as for the mean.
#include <iterator>
#include <string_view>

#include "edgesgd/core/robust_aggregator.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

// The largest f the flags take: far beyond any cohort a round can refuse it for.
constexpr std::uint32_t kMaxByzantine = 255;

bool Enabled(const RunConfig& config) { return config.robust.rule != RobustRule::kNone; }

Status Validate(const RunConfig& config) {
  if (config.robust.byzantine > kMaxByzantine) {
    return Status::InvalidArgument("--robust-f: f must be at most 255");
  }
  return ValidateRobustParams(config.robust);
}

// The rules by name, in RobustRule's order (the words of --robust).
constexpr std::string_view kRuleNames[] = {
    RobustRuleName(RobustRule::kNone), RobustRuleName(RobustRule::kMedian),
    RobustRuleName(RobustRule::kTrimmedMean), RobustRuleName(RobustRule::kMultiKrum),
    RobustRuleName(RobustRule::kCenteredClipping)};
static_assert(static_cast<std::size_t>(RobustRule::kCenteredClipping) + 1 == std::size(kRuleNames));

const char* UnlessSizedByF(const RunConfig& config) {
  const RobustRule rule = config.robust.rule;
  return rule == RobustRule::kTrimmedMean || rule == RobustRule::kMultiKrum
             ? nullptr
             : "it sizes the trimmed mean and multi_krum: it needs --robust trimmed_mean or "
               "--robust multi_krum";
}

const char* UnlessClipping(const RunConfig& config) {
  return config.robust.rule == RobustRule::kCenteredClipping
             ? nullptr
             : "--robust-clip-radius and --robust-clip-iterations tune centered clipping: they "
               "need --robust centered_clipping";
}

constexpr FeatureField kFields[] = {
    GroupField<&RunConfig::robust, &RobustParams::rule>(
        "robust",
        "Byzantine-robust aggregation in place of the mean (model downlink): the coordinate-wise "
        "median; the trimmed mean (drops the --robust-f largest and smallest values of each "
        "coordinate); multi_krum (averages the n - f updates closest to their neighbours); "
        "centered_clipping (clips each update's distance to the last aggregate). The server "
        "keeps the round's updates side by side: sampled workers x model floats",
        nullptr, kRuleNames),
    GroupField<&RunConfig::robust, &RobustParams::byzantine>(
        "robust_f", "f: faulty updates per round the trimmed mean and multi_krum are sized for",
        UnlessSizedByF),
    GroupField<&RunConfig::robust, &RobustParams::clip_radius>(
        "robust_clip_radius",
        "Centered clipping: tau, the largest distance an update may move the aggregate from the "
        "last round's",
        UnlessClipping),
    GroupField<&RunConfig::robust, &RobustParams::clip_iterations>(
        "robust_clip_iterations", "Centered clipping: L, clipping passes per round",
        UnlessClipping),
};

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--robust replaces the mean of updates: majority vote is not one (use --aggregate mean)"},
    {&kAggregateDownlinkFeature,
     "--robust aggregates decoded updates and broadcasts the model: use --downlink model (the "
     "model downlink)"},
    {&kPrivacyFeature,
     "--robust does not combine with --dp-mode: differential privacy calibrates its noise to a "
     "mean of clipped updates, and a robust rule is not one"},
    {&kScaffoldFeature,
     "--robust and --scaffold: SCAFFOLD keeps its control variate the mean of every device's "
     "change, and a robust rule would drop some of them"},
    {&kSecureAggregationFeature,
     "--robust compares the devices' updates: --secure-aggregation shows the server only their "
     "sum"},
};

}  // namespace

constinit const RunFeature kRobustFeature{"--robust", Enabled, Validate, kExcludes};
constinit const FeatureFields kRobustFields{&kRobustFeature, kFields};

}  // namespace edgesgd::protocol
