#include "cli/secure_flags.h"

#include "cli/bounded_option.h"
#include "cli/flag_error.h"
#include "cli/number_checks.h"

namespace edgesgd::cli {

void AddSecureFlags(CLI::App& command, RunFlags& o) {
  RunFlags* flags = &o;
  const auto given = [flags](const std::string&) { flags->secagg_flags_given = true; };
  command.add_flag("--secure-aggregation", o.secure_aggregation,
                   "Secure aggregation (SecAgg, Bonawitz et al. 2017): devices mask their "
                   "compressed updates so that the server learns only each round's sum (with "
                   "--codec identity, random_block or rand_k, --aggregate mean and --downlink "
                   "model: a masked payload as large as the plain one; with --codec qsgd and "
                   "--shared-scale: the levels in lanes of ceil(log2(2 levels workers + 1)) "
                   "bits) or, with --aggregate majority, each coordinate's count of +1 votes "
                   "(ceil(log2(workers + 1)) bits per coordinate). Keys and shares add a few "
                   "hundred bytes per device and round");
  AddBoundedOption(command, "--secagg-threshold", o.secagg_threshold, 0.5f, 1.0f,
                   "Fraction of each neighbourhood (a device and the devices it masks with) "
                   "whose shares recover a vanished device's masks, in (0.5, 1]: a round "
                   "survives as long as that many of every neighbourhood stay to the end, "
                   "and is aborted with the model unchanged otherwise")
      ->each(given);
  AddBoundedOption(command, "--secagg-neighbours", o.secagg_neighbours, 0u, protocol::kMaxWorkers,
                   "SecAgg+ (Bell et al. 2020): each device masks with this many others (even) "
                   "on a random ring, so its keys and shares grow with k rather than with the "
                   "cohort; about 2 log2(cohort) suits large cohorts. 0: every device masks "
                   "with every other")
      ->each(given);
  command
      .add_flag("--secagg-signed", o.secagg_signed,
                "Signed rounds against a server that lies (Bonawitz et al. 2017's active "
                "variant): every device signs its keys with an ECDSA P-256 key of `edgesgd "
                "keygen --signing-keys`, and before revealing any share it signs the survivor "
                "set and checks that t of its neighbourhood signed the same one. Costs each "
                "device two signatures and up to 2k verifications a round. The server then "
                "needs --secagg-verifying-keys, each worker --secagg-signing-key and "
                "--secagg-verifying-keys; simulate generates the keys")
      ->each(given);
  command
      .add_option("--secagg-bound", o.secagg_bound,
                  "Every value a device sends is clipped to [-B, B] and summed in 32-bit "
                  "fixed point, as finely as B times the worker count allows (clipped values "
                  "are counted on the devices)")
      ->capture_default_str()
      ->check(PositiveFloat())
      ->each(given);
}

bool SecureFlagsGiven(const RunFlags& o) { return o.secure_aggregation || o.secagg_flags_given; }

HostResult<> CheckSecureFlags(const RunFlags& o) {
  if (!o.secure_aggregation) {
    if (o.secagg_flags_given) {
      return FlagError(
          "the --secagg-* flags tune secure aggregation: they need --secure-aggregation");
    }
    return {};
  }
  if (o.secagg_threshold <= 0.5f) {
    return FlagError(
        "--secagg-threshold must exceed 0.5: a majority of each neighbourhood must hold a "
        "secret's shares");
  }
  if (o.secagg_neighbours % 2 != 0) {
    return FlagError(
        "--secagg-neighbours must be even (half of them on either side of a device's ring), "
        "or 0");
  }
  if (o.workers < 2) return FlagError("--secure-aggregation needs at least two --workers");
  if (o.codec.codec() == QsgdCodec::kName) {
    // Levels, not fixed point: the run's own check sizes the lanes for the workers.
    return {};
  }
  if (const Result<secagg::FixedPoint> format =
          protocol::SecureFixedPoint(SecureParamsOf(o), static_cast<std::uint32_t>(o.workers));
      !format.ok()) {
    return FlagError(std::string("--secagg-bound: ") + format.status().reason());
  }
  return {};
}

protocol::SecureAggregationParams SecureParamsOf(const RunFlags& o) {
  protocol::SecureAggregationParams params;
  params.enabled = o.secure_aggregation;
  params.threshold = o.secagg_threshold;
  params.neighbours = o.secagg_neighbours;
  params.bound = o.secagg_bound;
  params.signed_rounds = o.secagg_signed;
  return protocol::NormalizedSecureParams(params);
}

void WriteSecureSummary(SummaryWriter& summary, const protocol::RunConfig& config,
                        std::uint32_t workers) {
  const protocol::SecureAggregationParams& params = config.secure;
  if (!params.enabled) return;
  summary.Begin("secure_aggregation");
  summary.Field("threshold", static_cast<double>(params.threshold));
  summary.Field("neighbours", params.neighbours);
  summary.Field("signed", params.signed_rounds ? "yes" : "no");
  if (const QsgdParams* qsgd = protocol::SecureQsgdParams(config); qsgd != nullptr) {
    summary.Field("shared_scale", static_cast<double>(qsgd->shared_scale));
    summary.Field("lane_bits", protocol::SecureLevelLaneBits(qsgd->levels, workers));
  } else if (config.aggregation == protocol::AggregationKind::kMajority) {
    summary.Field("lane_bits", protocol::SecureVoteLaneBits(workers));
  } else {
    summary.Field("bound", static_cast<double>(params.bound));
    const Result<secagg::FixedPoint> format = protocol::SecureFixedPoint(params, workers);
    summary.Field("fraction_bits", format.ok() ? format.value().fraction_bits : 0u);
  }
  summary.End();
}

}  // namespace edgesgd::cli
