#include "edgesgd/protocol/aggregation/fednova.h"

#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) {
  return (config.aggregation_options & FedNovaAggregation::kOption.bit) != 0;
}

Status Validate(const RunConfig& config) {
  if (config.feedback.momentum != 0.0f) {
    return Status::InvalidArgument(
        "--fednova normalizes by local steps of plain SGD: with --momentum a step's weight "
        "depends on momentum the workers carry across rounds");
  }
  return Status::Ok();
}

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--fednova weighs updates by their local steps: majority vote takes one gradient per round "
     "(use --aggregate mean)"},
    {&kAggregateDownlinkFeature, "--fednova broadcasts the model: use --downlink model"},
    {&kScaffoldFeature, "--fednova and --scaffold are two corrections of local steps: pick one"},
    {&kPrivacyFeature,
     "--fednova does not combine with --dp-mode: weights by local steps change each update's "
     "sensitivity"},
    {&kSecureAggregationFeature,
     "--fednova weighs each update by its own local steps: --secure-aggregation shows the "
     "server only their sum"},
    {&kRobustFeature, "--fednova and --robust are two rules in place of the mean: pick one"},
    {&kAsyncFeature,
     "--fednova normalizes a synchronous round's updates: it does not combine with --buffer"},
};

}  // namespace

constinit const RunFeature kFedNovaFeature{"--fednova", Enabled, Validate, kExcludes};

Status FedNovaAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  run_steps_ = setup.config->feedback.local_steps;
  return normalized_.Init(arena, *setup.codecs, setup.config->layout, setup.config->codec);
}

void FedNovaAggregation::BeginRound(std::uint32_t) {
  normalized_.Reset();
  steps_taken_ = 0;
}

Status FedNovaAggregation::Add(const CodecParams& params, const PayloadView& payload,
                               const CodecContext& context, const wire::UpdateInfo& update) {
  const std::uint32_t steps = update.local_steps == 0 ? run_steps_ : update.local_steps;
  if (steps > run_steps_) {
    return Status::InvalidArgument("the update names more local steps than the run's H");
  }
  EDGESGD_TRY(normalized_.AddWithParams(params, payload, context, 1.0f / static_cast<float>(steps)));
  steps_taken_ += steps;
  return Status::Ok();
}

Status FedNovaAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("FedNova broadcasts the model");
}

Status FedNovaAggregation::Apply(const PayloadView&, const CodecContext&, std::span<float> model) {
  const std::uint32_t count = normalized_.count();
  if (count == 0) return Status::FailedPrecondition("the round has no updates");
  // Mean() is sum_i w_i C(p_i) / sum_i w_i with w_i = 1 / tau_i; the step is tau_eff times
  // sum_i w_i C(p_i) / count.
  const double tau_eff = static_cast<double>(steps_taken_) / count;
  const double scale = -tau_eff * static_cast<double>(normalized_.total_weight()) / count;
  return normalized_.AddScaledMean(static_cast<float>(scale), model);
}

}  // namespace edgesgd::protocol
