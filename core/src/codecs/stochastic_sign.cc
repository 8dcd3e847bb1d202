#include "edgesgd/core/codecs/stochastic_sign.h"

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

constexpr std::size_t kWordBits = 32;

// Packs the stochastic signs of one tensor `x` into `words`, drawing from `rng`. Comparing u with
// (B + x) / 2B clips for free: the probability is >= 1 at x >= B and <= 0 at x <= -B.
void PackStochasticSigns(std::span<const float> x, float bound, CounterRng& rng,
                         std::span<std::uint32_t> words) {
  const float half_over_bound = 0.5f / bound;
  for (std::size_t begin = 0, w = 0; begin < x.size(); begin += kWordBits, ++w) {
    const std::size_t count = x.size() - begin < kWordBits ? x.size() - begin : kWordBits;
    std::uint32_t word = 0;
    for (std::size_t j = 0; j < count; ++j) {
      const float plus_probability = 0.5f + x[begin + j] * half_over_bound;
      // Written as "not >=" so that a NaN probability votes +1.
      const std::uint32_t plus = rng.NextFloat() >= plus_probability ? 0u : 1u;
      word |= plus << j;
    }
    words[w] = word;
  }
}

}  // namespace

Status StochasticSignCodec::Encode(const StochasticSignParams& params, const TensorLayout& layout,
                                   const CodecContext& context, std::span<const float> input,
                                   const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedEncodeShape<StochasticSignCodec>(params, layout, input, out, scratch));
  const float scale = params.scale == StochasticSignScale::kBound ? params.bound : 1.0f;
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    const std::size_t word_count = SignCodec::WordsFor(x.size());
    CounterRng rng(context.seed, context.round, static_cast<std::uint32_t>(t),
                   StreamId(RandomPurpose::kQuantizationDither, context.worker));
    PackStochasticSigns(x, params.bound, rng, out.words.subspan(word, word_count));
    out.scales[t] = scale;
    word += word_count;
  }
  return Status::Ok();
}

Status StochasticSignCodec::DecodeAdd(const StochasticSignParams& params,
                                      const TensorLayout& layout, const CodecContext& context,
                                      const PayloadView& payload, float weight,
                                      std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(Validate(params));
  // The scale travels in the payload, so SignCodec decodes either form.
  return SignCodec::DecodeAdd(SignParams{}, layout, context, payload, weight, accumulator, scratch);
}

}  // namespace edgesgd
