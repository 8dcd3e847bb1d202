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
      ->check(CLI::Range(kMinQsgdBits, kMaxQsgdBits));
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

}  // namespace edgesgd::cli
