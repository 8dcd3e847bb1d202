#include "cli/flags.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace edgesgd::cli {
namespace {

// A flag value that must be a positive, finite number; CLI11's PositiveNumber lets NaN and inf
// through and prints the whole double range in its message.
const CLI::Validator kPositiveFinite(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || end == nullptr || *end != '\0' || !(value > 0) || !std::isfinite(value)) {
        return "must be a positive finite number, got '" + text + "'";
      }
      return "";
    },
    "POSITIVE");

}  // namespace

CodecParams CodecFlags::ToParams() const {
  CodecParams params;
  params.k_ratio = k_ratio;
  params.block_ratio = block_ratio;
  const Result<std::uint32_t> levels = QsgdLevelsForBits(bits);
  params.qsgd_levels = levels.ok() ? levels.value() : 0;
  params.qsgd_bucket = bucket;
  params.reg_top_k_mu = mu;
  params.reg_top_k_q = reg_q;
  return params;
}

void AddCodecParameterFlags(CLI::App& command, CodecFlags& flags) {
  command.add_option("--k-ratio", flags.k_ratio,
                     "top_k / rand_k / reg_top_k: fraction of each tensor's coordinates sent, in (0, 1]")
      ->capture_default_str()
      ->check(CLI::Range(1e-9f, 1.0f));
  command.add_option("--block-ratio", flags.block_ratio,
                     "random_block: send one block of size/ratio coordinates per tensor")
      ->capture_default_str()
      ->check(CLI::Range(std::uint32_t{1}, std::uint32_t{1u << 31}));
  command.add_option("--bits", flags.bits,
                     "qsgd: bits per coordinate including the sign (levels = 2^(bits-1) - 1)")
      ->capture_default_str()
      ->check(CLI::Range(kMinQsgdBits, kMaxQsgdBits))
      ->each([&flags](const std::string&) { flags.bits_given = true; });
  command.add_option("--bucket", flags.bucket, "qsgd: coordinates sharing one norm")
      ->capture_default_str()
      ->check(CLI::Range(std::uint32_t{1}, std::uint32_t{1u << 24}));
  command.add_option("--mu", flags.mu,
                     "reg_top_k: score tanh(|1 + Delta| / mu) * |a|; smaller mu holds back "
                     "coordinates whose last aggregate cancelled this worker's push more "
                     "strongly (> 0; 4 for linear regression, 5 for ResNet-18)")
      ->capture_default_str()
      ->check(kPositiveFinite);
  command.add_option("--reg-q", flags.reg_q,
                     "reg_top_k: Delta of coordinates without a posterior (> 0; large enough "
                     "that they score |a| as in Top-k)")
      ->capture_default_str()
      ->check(kPositiveFinite);
}

QuantScheduleParams QuantScheduleFlags::Apply(CodecParams& codec) const {
  QuantScheduleParams params;
  if (!dynamic()) return params;
  params.kind = QuantScheduleKind::kDq;
  params.bits_min = bits_min;
  params.bits_max = bits_max;
  params.dq_k = dq_k;
  params.dq_rho = dq_rho;
  const Result<std::uint32_t> levels = QsgdLevelsForBits(bits_max);
  codec.qsgd_levels = levels.ok() ? levels.value() : 0;
  return params;
}

void AddQuantScheduleFlags(CLI::App& command, QuantScheduleFlags& flags) {
  const auto mark_dq = [&flags](const std::string&) { flags.dq_flags_given = true; };
  command.add_option("--quant-schedule", flags.schedule,
                     "qsgd: fixed (--bits every round) or dq (DQ-SGD: each worker picks the "
                     "round's bits from its gradient norm and the rounds left, "
                     "s = ceil(||g|| rho^((T-1-t)/2) K), bits = 1 + ceil(log2(s+1)) clipped to "
                     "--bits-min..--bits-max)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fixed", "dq"}));
  command.add_option("--bits-min", flags.bits_min, "dq: fewest bits per coordinate")
      ->capture_default_str()
      ->check(CLI::Range(kMinQsgdBits, kMaxQsgdBits))
      ->each(mark_dq);
  command.add_option("--bits-max", flags.bits_max,
                     "dq: most bits per coordinate (frames are sized for it)")
      ->capture_default_str()
      ->check(CLI::Range(kMinQsgdBits, kMaxQsgdBits))
      ->each(mark_dq);
  command.add_option("--dq-k", flags.dq_k, "dq: the constant K scaling the level count, > 0")
      ->capture_default_str()
      ->each(mark_dq);
  command.add_option("--dq-rho", flags.dq_rho,
                     "dq: contraction rho = 1 - lr * mu in (0, 1]; smaller spends fewer bits "
                     "early")
      ->capture_default_str()
      ->each(mark_dq);
}

std::string CheckQuantScheduleFlags(const QuantScheduleFlags& flags, const CodecFlags& codec_flags,
                                    const std::string& codec) {
  if (!flags.dynamic()) {
    if (flags.dq_flags_given) {
      return "--bits-min, --bits-max, --dq-k and --dq-rho configure --quant-schedule dq";
    }
    return "";
  }
  if (codec != "qsgd") return "--quant-schedule dq chooses qsgd bit widths: it needs --codec qsgd";
  if (codec_flags.bits_given) {
    return "--quant-schedule dq picks each round's bits within --bits-min..--bits-max: drop "
           "--bits";
  }
  if (flags.bits_min > flags.bits_max) return "--bits-min must not exceed --bits-max";
  if (!(flags.dq_k > 0.0f) || !std::isfinite(flags.dq_k)) {
    return "--dq-k must be a positive number";
  }
  if (!(flags.dq_rho > 0.0f && flags.dq_rho <= 1.0f)) return "--dq-rho must be in (0, 1]";
  return "";
}

}  // namespace edgesgd::cli
