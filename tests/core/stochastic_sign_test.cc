#include "edgesgd/core/codecs/stochastic_sign.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

using test_util::Layout;

struct Encoded {
  std::vector<std::uint32_t> words;
  std::vector<float> scales;
  PayloadView View() const { return PayloadView({}, {}, words, scales); }
};

Encoded Encode(const StochasticSignParams& params, const TensorLayout& layout,
               const CodecContext& context, const std::vector<float>& input) {
  const PayloadShape shape = StochasticSignCodec::Shape(params, layout).value();
  Encoded encoded;
  encoded.words.assign(shape.words, 0xDEADBEEFu);  // garbage: Encode must write every word
  encoded.scales.assign(shape.scales, -7.0f);
  PayloadSpans out{{}, {}, encoded.words, encoded.scales};
  EXPECT_EQ(StochasticSignCodec::Encode(params, layout, context, input, out, {}), Status::Ok());
  return encoded;
}

// The vote (+1 or -1) of coordinate i of the input, read from its tensor's words.
int Vote(const TensorLayout& layout, const Encoded& encoded, std::size_t i) {
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    if (i < layout.offset(t) + layout.size(t)) {
      const std::size_t local = i - layout.offset(t);
      return ((encoded.words[word + local / 32] >> (local % 32)) & 1u) != 0 ? 1 : -1;
    }
    word += SignCodec::WordsFor(layout.size(t));
  }
  return 0;
}

TEST(StochasticSignTest, ShapeIsTheSignPayload) {
  const TensorLayout layout = Layout({33, 32, 1});
  const PayloadShape shape = StochasticSignCodec::Shape({}, layout).value();
  EXPECT_EQ(shape, SignCodec::Shape({}, layout).value());
  EXPECT_EQ(shape.words, 4u);
  EXPECT_EQ(shape.scales, 3u);
  EXPECT_EQ(StochasticSignCodec::kLayout, SignCodec::kLayout);
}

// The mean vote of every coordinate over many independent draws is clip(x, B) / B: inside the
// bound the votes are unbiased, at and beyond it they are all one sign.
TEST(StochasticSignTest, VotesAreUnbiasedInsideTheBoundAndClippedOutside) {
  const StochasticSignParams params{.bound = 0.5f, .scale = StochasticSignScale::kUnit};
  const std::vector<float> input = {-0.5f, -0.4f, -0.25f, -0.1f, 0.0f,   0.05f, 0.2f, 0.45f,
                                    0.5f,  0.7f,  -3.0f,  100.f, -1e30f, 0.3f,  -0.3f};
  const TensorLayout layout = Layout({9, 6});
  constexpr int kTrials = 20000;
  std::vector<long> sum(input.size(), 0);
  for (int trial = 0; trial < kTrials; ++trial) {
    // Rounds and workers both vary: each (round, worker) is an independent stream.
    const CodecContext context{77, static_cast<std::uint32_t>(trial / 16),
                               static_cast<std::uint32_t>(trial % 16)};
    const Encoded encoded = Encode(params, layout, context, input);
    for (std::size_t i = 0; i < input.size(); ++i) sum[i] += Vote(layout, encoded, i);
  }
  for (std::size_t i = 0; i < input.size(); ++i) {
    const double clipped = std::fmax(-0.5, std::fmin(0.5, static_cast<double>(input[i])));
    const double expected = clipped / 0.5;
    const double mean = static_cast<double>(sum[i]) / kTrials;
    if (std::fabs(expected) == 1.0) {
      EXPECT_EQ(mean, expected) << "coordinate " << i << " = " << input[i];
    } else {
      // A vote lies in [-1, 1]: by Hoeffding the mean of kTrials votes is within 6 / sqrt(kTrials)
      // of its expectation except with probability 2 exp(-18).
      EXPECT_NEAR(mean, expected, 6.0 / std::sqrt(static_cast<double>(kTrials)))
          << "coordinate " << i << " = " << input[i];
    }
  }
}

TEST(StochasticSignTest, ScaleIsTheBoundOrOne) {
  const TensorLayout layout = Layout({40, 3});
  const std::vector<float> input(43, 0.01f);
  const Encoded bound = Encode({.bound = 0.25f}, layout, {1, 2, 3}, input);
  EXPECT_EQ(bound.scales, (std::vector<float>{0.25f, 0.25f}));
  const Encoded unit =
      Encode({.bound = 0.25f, .scale = StochasticSignScale::kUnit}, layout, {1, 2, 3}, input);
  EXPECT_EQ(unit.scales, (std::vector<float>{1.0f, 1.0f}));
  // The scale does not change the draws.
  EXPECT_EQ(bound.words, unit.words);
  // Padding bits stay 0 (8 coordinates used of tensor 0's second word, 3 of tensor 1's).
  EXPECT_EQ(bound.words[1] >> 8, 0u);
  EXPECT_EQ(bound.words[2] >> 3, 0u);
}

// Decoding with the bound's scale gives +-B per coordinate, whose mean is the clipped input.
TEST(StochasticSignTest, DecodedBoundScaleEstimatesTheClippedInput) {
  const StochasticSignParams params{.bound = 2.0f};
  const TensorLayout layout = Layout({7});
  const std::vector<float> input = {-2.5f, -1.0f, -0.2f, 0.0f, 0.6f, 1.5f, 9.0f};
  constexpr int kTrials = 20000;
  std::vector<float> accumulator(input.size(), 0.0f);
  for (int trial = 0; trial < kTrials; ++trial) {
    const CodecContext context{5, static_cast<std::uint32_t>(trial), 1};
    const Encoded encoded = Encode(params, layout, context, input);
    ASSERT_EQ(AllCodecs().DecodeAdd(params, layout, context, encoded.View(), 1.0f / kTrials,
                                    accumulator, {}),
              Status::Ok());
  }
  for (std::size_t i = 0; i < input.size(); ++i) {
    const float clipped = std::fmax(-2.0f, std::fmin(2.0f, input[i]));
    // Each decoded value is +-2: Hoeffding as above, for values in an interval of width 4.
    EXPECT_NEAR(static_cast<double>(accumulator[i]), static_cast<double>(clipped),
                6.0 * 2.0 / std::sqrt(static_cast<double>(kTrials)))
        << i;
  }
}

// The draws are a function of (seed, round, tensor, worker): the same context gives the same
// bytes, another worker, round or seed other bytes, and the stream is the worker's private
// dither stream (not a shared one every worker would draw alike).
TEST(StochasticSignTest, DeterministicPerContextAndPrivatePerWorker) {
  const StochasticSignParams params{.bound = 1.0f};
  const TensorLayout layout = Layout({300, 45});
  const std::vector<float> input = test_util::UniformVector(layout.dimension(), 3, 1, 0.5f);
  const Encoded a = Encode(params, layout, {9, 4, 1}, input);
  EXPECT_EQ(a.words, Encode(params, layout, {9, 4, 1}, input).words);
  for (const CodecContext& other :
       {CodecContext{9, 4, 2}, CodecContext{9, 5, 1}, CodecContext{10, 4, 1}}) {
    EXPECT_NE(a.words, Encode(params, layout, other, input).words);
  }
  // Coordinate 0 of tensor 1 draws the first uniform of that tensor's private stream.
  CounterRng rng(9, 4, 1, StreamId(RandomPurpose::kQuantizationDither, 1));
  const float u = rng.NextFloat();
  const float x = input[300];
  EXPECT_EQ(Vote(layout, a, 300), u >= 0.5f + x * 0.5f ? -1 : 1);
}

TEST(StochasticSignTest, NonFiniteInputsVoteLikeTheirSign) {
  const StochasticSignParams params{.bound = 1.0f};
  const TensorLayout layout = Layout({3});
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> input = {inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  for (std::uint32_t round = 0; round < 64; ++round) {
    const Encoded encoded = Encode(params, layout, {1, round, 0}, input);
    EXPECT_EQ(encoded.words[0], 0b101u) << "round " << round;  // +inf +1, -inf -1, NaN +1
  }
}

TEST(StochasticSignTest, VoteFormKeepsTheBoundWithUnitScales) {
  const StochasticSignParams params{.bound = 0.3f};
  const StochasticSignParams votes = StochasticSignCodec::VoteForm(params);
  EXPECT_EQ(votes.bound, 0.3f);
  EXPECT_EQ(votes.scale, StochasticSignScale::kUnit);
  EXPECT_EQ(VoteForm(CodecParams(params)).value(), CodecParams(votes));
}

TEST(StochasticSignTest, RejectsBadParametersWithReasons) {
  const TensorLayout layout = Layout({8});
  for (const float bound : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()}) {
    const Status status = StochasticSignCodec::Validate({.bound = bound});
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bound;
    EXPECT_STREQ(status.reason(), "the sign bound B must be positive and finite");
    EXPECT_FALSE(StochasticSignCodec::Shape({.bound = bound}, layout).ok());
  }
  const Status scale =
      StochasticSignCodec::Validate({.scale = static_cast<StochasticSignScale>(2)});
  EXPECT_EQ(scale.code(), StatusCode::kInvalidArgument);
  EXPECT_STREQ(scale.reason(), "unknown stochastic sign scale");
  EXPECT_EQ(StochasticSignCodec::Validate({}), Status::Ok());

  // Encode checks its parameters, input size and output spans.
  std::vector<std::uint32_t> words(1);
  std::vector<float> scales(1);
  const std::vector<float> input(8, 0.0f);
  EXPECT_EQ(
      StochasticSignCodec::Encode({.bound = 0.0f}, layout, {}, input, {{}, {}, words, scales}, {})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(StochasticSignCodec::Encode({}, layout, {}, std::vector<float>(7),
                                        {{}, {}, words, scales}, {})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(StochasticSignCodec::Encode({}, layout, {}, input, {{}, {}, words, {}}, {}).code(),
            StatusCode::kResourceExhausted);
  // DecodeAdd refuses bad parameters and a malformed payload (a padding bit set), untouched.
  std::vector<float> accumulator(8, 1.0f);
  words[0] = 0x100u;
  scales[0] = 1.0f;
  const PayloadView payload({}, {}, words, scales);
  EXPECT_EQ(
      StochasticSignCodec::DecodeAdd({.bound = -1.0f}, layout, {}, payload, 1.0f, accumulator, {})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(StochasticSignCodec::DecodeAdd({}, layout, {}, payload, 1.0f, accumulator, {}).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(accumulator, std::vector<float>(8, 1.0f));
}

}  // namespace
}  // namespace edgesgd
