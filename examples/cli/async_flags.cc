#include "cli/async_flags.h"

#include <cstdlib>

#include "cli/bounded_option.h"
#include "cli/flag_error.h"

namespace edgesgd::cli {
namespace {

constexpr char kStalenessForms[] = "constant, sqrt or poly:A with A in (0, 16]";

// "constant", "sqrt" or "poly:A" into `out`; false for anything else.
bool ParseStaleness(const std::string& text, protocol::AsyncParams& out) {
  using protocol::StalenessKind;
  if (text == protocol::StalenessName(StalenessKind::kConstant)) {
    out.staleness = StalenessKind::kConstant;
    return true;
  }
  if (text == protocol::StalenessName(StalenessKind::kInverseSqrt)) {
    out.staleness = StalenessKind::kInverseSqrt;
    return true;
  }
  const std::string prefix = std::string(protocol::StalenessName(StalenessKind::kPolynomial)) + ":";
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size()) return false;
  char* end = nullptr;
  const float exponent = std::strtof(text.c_str() + prefix.size(), &end);
  if (end == nullptr || *end != '\0') return false;
  out.staleness = StalenessKind::kPolynomial;
  out.exponent = exponent;
  return protocol::ValidateAsyncParams(protocol::AsyncParams{
                                           .buffer = 1,
                                           .staleness = StalenessKind::kPolynomial,
                                           .exponent = exponent})
      .ok();
}

}  // namespace

void AddAsyncFlags(CLI::App& command, RunFlags& o) {
  RunFlags* flags = &o;
  command.add_option("--buffer", o.buffer,
                     "Buffered asynchronous aggregation (FedBuff): the server moves the model "
                     "after every K updates, from whichever workers answer first, instead of "
                     "waiting for a round's cohort; --rounds counts these model versions and "
                     "--participation becomes the fraction of workers training at once. 0: "
                     "synchronous rounds")
      ->capture_default_str();
  command.add_option("--staleness", o.staleness,
                     "How an update computed tau versions ago weighs in the buffer: constant "
                     "(1), sqrt (1/sqrt(1+tau)) or poly:A ((1+tau)^-A); needs --buffer")
      ->capture_default_str()
      ->each([flags](const std::string&) { flags->async_flags_given = true; });
  AddBoundedOption(command, "--max-staleness", o.max_staleness, 0u, protocol::kMaxStalenessBound,
                   "Versions an update may be behind before the server drops it (counted as "
                   "stale in the metrics); needs --buffer")
      ->each([flags](const std::string&) { flags->async_flags_given = true; });
}

bool AsyncFlagsGiven(const RunFlags& o) { return o.buffer != 0 || o.async_flags_given; }

HostResult<> CheckAsyncFlags(const RunFlags& o) {
  protocol::AsyncParams parsed;
  if (!ParseStaleness(o.staleness, parsed)) {
    return FlagError("--staleness must be " + std::string(kStalenessForms) + ", not '" +
                     o.staleness + "'");
  }
  if (o.buffer == 0) {
    if (o.async_flags_given) {
      return FlagError(
          "--staleness and --max-staleness weigh asynchronous updates: they need --buffer K");
    }
    return {};
  }
  if (o.buffer > o.workers) {
    return FlagError(
        "--buffer cannot exceed --workers: a model version takes one update from each of K "
        "different workers");
  }
  return {};
}

protocol::AsyncParams AsyncParamsOf(const RunFlags& o) {
  protocol::AsyncParams params;
  ParseStaleness(o.staleness, params);
  params.buffer = o.buffer;
  params.max_staleness = o.max_staleness;
  return protocol::NormalizedAsyncParams(params);
}

void WriteAsyncSummary(SummaryWriter& summary, const protocol::AsyncParams& params) {
  if (!protocol::IsAsynchronous(params)) return;
  summary.Begin("async");
  summary.Field("buffer", params.buffer);
  summary.Field("staleness", std::string(protocol::StalenessName(params.staleness)));
  if (params.staleness == protocol::StalenessKind::kPolynomial) {
    summary.Field("exponent", static_cast<double>(params.exponent));
  }
  summary.Field("max_staleness", params.max_staleness);
  summary.End();
}

}  // namespace edgesgd::cli
