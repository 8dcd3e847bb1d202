#pragma once

// The features of a parameter-server run as components. Each feature lives in its own file with
// a RunFeature descriptor: when it is on, what its own parameters must satisfy, and the features
// it cannot run with, each with the reason. One checker (CheckRunFeatures) reads the
// descriptors, so no pair of features is checked anywhere else. Adding a feature is its file and
// one line in a registry of run_features.cc.

#include <span>
#include <string_view>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"

namespace edgesgd::protocol {

struct RunFeature;

// A feature this one cannot run with. The reason names both by their flags and says why. Like
// every Status text it is kept only where Status texts are (KeptReason): a build short of flash
// stores none of it.
struct FeatureExclusion {
  constexpr FeatureExclusion(const RunFeature* excluded, const char* why)
      : other(excluded), reason(KeptReason(why)) {}

  const RunFeature* other;
  const char* reason;
};

// A feature's parameter as a field of the RunConfig, like a codec's (ParamField in codec.h):
// its name (the flag --name with '-' for '_', and its TOML key), help text, kind and choices,
// its word in the RunConfig, and, when the run's other settings make it unread, why (a flag for
// it given explicitly is then an error rather than silently ignored). The command line makes
// its flags from these declarations. The fields are tables apart from the RunFeature
// (FeatureFields), reached only through FeatureFieldTables: a device image, which never parses
// flags, links none of them.
using FeatureField = ParamField<RunConfig>;

// The field of `Member` within the RunConfig's parameter group `Group` (&RunConfig::robust,
// &RobustParams::byzantine), of the kind its type gives (see Field in codec.h).
template <auto Group, auto Member>
constexpr FeatureField GroupField(std::string_view name, std::string_view help,
                                  const char* (*unused_because)(const RunConfig&) = nullptr,
                                  std::span<const std::string_view> choices = {}) {
  using Value = typename edgesgd::internal::MemberOf<decltype(Member)>::Type;
  FeatureField field;
  field.name = name;
  field.help = help;
  field.kind = edgesgd::internal::KindOf<Value>();
  field.choices = choices;
  field.get = [](const RunConfig& config) {
    return edgesgd::internal::ToWord((config.*Group).*Member);
  };
  field.set = [](RunConfig& config, std::uint32_t word) {
    (config.*Group).*Member = edgesgd::internal::FromWord<Value>(word);
  };
  field.unused_because = unused_because;
  return field;
}

struct RunFeature {
  using Predicate = bool (*)(const RunConfig& config);
  using Check = Status (*)(const RunConfig& config);

  constexpr RunFeature(const char* flag, Predicate on, Check check,
                       std::span<const FeatureExclusion> excluded)
      : name(KeptReason(flag)), enabled(on), validate(check), excludes(excluded) {}

  const char* name;  // the --flag that turns it on (kept like a Status text)
  Predicate enabled;
  // Its own parameters, and what it needs of the codec, the schedule and the aggregation when
  // that is not a feature of its own. Reads only `config`.
  Check validate;
  // Only features listed before it in the same registry, or in the shared one when this is a
  // server feature: a worker image then links only the features its Welcome can name.
  std::span<const FeatureExclusion> excludes;
};

// A feature's parameters as fields, declared in the feature's file beside its RunFeature.
struct FeatureFields {
  const RunFeature* feature;
  std::span<const FeatureField> fields;
};

// Features a worker learns from its Welcome.
extern const RunFeature kMajorityVoteFeature;
extern const RunFeature kAggregateDownlinkFeature;
extern const RunFeature kProximalFeature;
extern const RunFeature kScaffoldFeature;
extern const RunFeature kPrivacyFeature;
extern const RunFeature kSecureAggregationFeature;
// Features only the server runs (the Welcome does not carry them).
extern const RunFeature kRobustFeature;
extern const RunFeature kServerOptimizerFeature;
extern const RunFeature kAsyncFeature;

// Field tables of the features whose flags the command line makes from them.
extern const FeatureFields kProximalFields;
extern const FeatureFields kPrivacyFields;
extern const FeatureFields kRobustFields;

// For each feature of `features` that `config` turns on, in order: kInvalidArgument with the
// reason of the first excluded feature that is on too, else the feature's own validation.
Status CheckRunFeatures(const RunConfig& config, std::span<const RunFeature* const> features);

// The features of the aggregation components `config.aggregation_options` switches on
// (AggregationOption), as CheckRunFeatures; kInvalidArgument for a bit no component declares.
Status CheckAggregationOptions(const RunConfig& config);

// The registries: the features of the Welcome, and those of the server alone.
std::span<const RunFeature* const> SharedRunFeatures();
std::span<const RunFeature* const> ServerRunFeatures();

// Every feature's field table (the features whose flags are still written by hand in the CLI
// have none here).
std::span<const FeatureFields* const> FeatureFieldTables();

}  // namespace edgesgd::protocol
