#include "edgesgd/core/codecs/stochastic_sign.h"

#include <algorithm>

#include "edgesgd/core/check.h"
#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/reduce.h"

namespace edgesgd {

namespace internal {

void StochasticSignPack(std::span<const float> x, float bound, CounterRng& rng,
                        std::span<std::uint32_t> words) {
  constexpr std::size_t kWordBits = 32;
  EDGESGD_CHECK(words.size() >= SignCodec::WordsFor(x.size()));
  for (std::size_t base = 0, w = 0; base < x.size(); base += kWordBits, ++w) {
    const std::size_t count = std::min(kWordBits, x.size() - base);
    std::uint32_t word = 0;
    for (std::size_t j = 0; j < count; ++j) {
      // 1 - 2u is exact (a multiple of 2^-23 in (-1, 1]), so the threshold is one rounding;
      // comparing rather than adding noise to x leaves nothing for an FMA to fuse.
      const float threshold = bound * (1.0f - 2.0f * rng.NextFloat());
      word |= (x[base + j] < threshold ? 0u : 1u) << j;
    }
    words[w] = word;
  }
}

}  // namespace internal

Status StochasticSignCodec::Encode(const Params& params, const TensorLayout& layout,
                                   const CodecContext& context, std::span<const float> input,
                                   const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedEncodeShape<StochasticSignCodec>(params, layout, input, out, scratch));
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    const std::size_t word_count = SignCodec::WordsFor(x.size());
    CounterRng rng(context.seed, context.round, static_cast<std::uint32_t>(t),
                   StreamId(RandomPurpose::kSignNoise, context.worker));
    internal::StochasticSignPack(x, params.noise_bound, rng, out.words.subspan(word, word_count));
    out.scales[t] = params.scale == SignScale::kMeanAbs
                        ? internal::MeanAbsScale(internal::SumAbs(x), x.size())
                        : 1.0f;
    word += word_count;
  }
  return Status::Ok();
}

Status StochasticSignCodec::DecodeAdd(const Params& params, const TensorLayout& layout,
                                      const CodecContext&, const PayloadView& payload,
                                      float weight, std::span<float> accumulator,
                                      std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedDecodeShape<StochasticSignCodec>(params, layout, payload,
                                                                accumulator, scratch));
  return internal::AddSignWords(layout, payload, weight, accumulator);
}

}  // namespace edgesgd
