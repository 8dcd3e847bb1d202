// RegTop-k (docs/algorithms.md): selection by tanh(|1 + Delta| / mu) * |a|, Top-k's payload, and
// the posterior update Delta = (n * ghat - s) / s after every aggregate.

#include "edgesgd/core/codecs/reg_top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "test_util.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::kInf;
using test_util::kNaN;
using test_util::Layout;
using test_util::PayloadBuffers;

constexpr float kQ = 1e8f;

RegTopKParams RegParams(float k_ratio, float mu = 4.0f, float q = kQ) {
  return RegTopKParams{.k_ratio = k_ratio, .mu = mu, .q = q};
}

// Small integers and normals mixed: ties, zeros of both signs, both signs.
std::vector<float> TiedInput(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = i % 3 == 0 ? normal(rng) : static_cast<float>(small(rng));
    if (i % 17 == 5) x[i] = -0.0f;
  }
  return x;
}

// The reference selection: per tensor, sort by (score bits descending, index ascending), keep
// k, report ascending global indices. Scores are computed with the documented formula.
std::vector<std::uint32_t> ReferenceSelection(const RegTopKParams& params,
                                              const TensorLayout& layout,
                                              const std::vector<float>& delta,
                                              const std::vector<float>& a) {
  std::vector<std::uint32_t> selected;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t begin = layout.offset(t);
    const std::size_t size = layout.size(t);
    std::vector<std::uint32_t> score_bits(size);
    for (std::size_t j = 0; j < size; ++j) {
      const float weight = std::tanh(std::fabs(1.0f + delta[begin + j]) / params.mu);
      score_bits[j] = std::bit_cast<std::uint32_t>(weight * std::fabs(a[begin + j])) & 0x7FFFFFFFu;
    }
    std::vector<std::uint32_t> order(size);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
      return score_bits[x] > score_bits[y];
    });
    const std::size_t k = SparseCount(size, params.k_ratio).value();
    order.resize(k);
    std::sort(order.begin(), order.end());
    for (const std::uint32_t j : order) selected.push_back(static_cast<std::uint32_t>(begin + j));
  }
  return selected;
}

// A copy of a posterior (empty while an aggregate is outstanding).
std::vector<float> Copy(std::span<const float> delta) {
  return std::vector<float>(delta.begin(), delta.end());
}

// RegTop-k's selector over its own state, in test-owned storage, reset to Delta = Q.
class Selector {
 public:
  Selector(const TensorLayout& layout, const RegTopKParams& params)
      : layout_(layout),
        params_(params),
        values_(RegTopKCodec::SelectorStateFloats(params, layout)) {
    state_.values = values_;
    RegTopKCodec::SelectorReset(params_, state_);
  }
  Selector(const Selector&) = delete;
  Selector& operator=(const Selector&) = delete;

  Status Encode(std::span<const float> input, const PayloadSpans& out,
                std::span<std::byte> scratch) {
    return RegTopKCodec::SelectorEncode(params_, layout_, state_, input, out, scratch);
  }
  Status Observe(std::span<const float> mean_update, std::uint32_t contributors) {
    return RegTopKCodec::SelectorObserve(params_, state_, mean_update, contributors);
  }
  Status ObserveChange(std::span<const float> before, std::span<const float> after,
                       std::uint32_t contributors) {
    return RegTopKCodec::SelectorObserveChange(params_, state_, before, after, contributors);
  }
  void Reset() { RegTopKCodec::SelectorReset(params_, state_); }

  // Delta while no aggregate is outstanding; empty otherwise (the state holds what was sent).
  std::span<const float> posterior() const {
    return state_.awaiting_aggregate ? std::span<const float>() : std::span<const float>(values_);
  }
  bool awaiting_aggregate() const { return state_.awaiting_aggregate; }

 private:
  TensorLayout layout_;
  RegTopKParams params_;
  std::vector<float> values_;
  SelectorState state_;
};

struct Encoded {
  Status status;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};

Encoded EncodeWith(const RegTopKParams& params, const TensorLayout& layout,
                   const std::vector<float>& delta, const std::vector<float>& a) {
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  Encoded result;
  result.status =
      RegTopKCodec::EncodeWithDistortion(params, layout, delta, a, payload.spans(), scratch);
  result.indices = payload.indices;
  result.values = payload.values;
  return result;
}

TEST(RegTopKCodec, WithoutPosteriorPicksExactlyTopKs) {
  for (const std::vector<std::uint64_t>& sizes :
       {std::vector<std::uint64_t>{1}, {7}, {100}, {37, 100, 5}, {3000, 64}}) {
    const TensorLayout layout = Layout(sizes);
    const std::size_t d = layout.dimension();
    for (const float ratio : {0.01f, 0.1f, 0.5f, 0.6f, 0.7f, 1.0f}) {
      for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(testing::Message() << "d=" << d << " ratio=" << ratio << " seed=" << seed);
        const std::vector<float> a = TiedInput(d, seed);
        const RegTopKParams reg = RegParams(ratio);
        const TopKParams top{.k_ratio = ratio};
        const PayloadShape shape = EncodedShape(top, layout).value();
        ASSERT_EQ(EncodedShape(reg, layout).value(), shape);
        PayloadBuffers expected(shape), stateless(shape), explicit_q(shape), stateful(shape);
        std::vector<std::byte> top_scratch(CodecScratchBytes(top, layout));
        std::vector<std::byte> scratch(CodecScratchBytes(reg, layout));
        const CodecContext context{3, 1, 0};
        ASSERT_TRUE(
            AllCodecs().Encode(top, layout, context, a, expected.spans(), top_scratch).ok());
        // The registry's stateless form, an explicit Delta = Q, and a fresh selector.
        ASSERT_TRUE(AllCodecs().Encode(reg, layout, context, a, stateless.spans(), scratch).ok());
        const std::vector<float> all_q(d, kQ);
        ASSERT_TRUE(RegTopKCodec::EncodeWithDistortion(reg, layout, all_q, a, explicit_q.spans(),
                                                       scratch)
                        .ok());
        Selector selector(layout, reg);
        ASSERT_TRUE(selector.Encode(a, stateful.spans(), scratch).ok());
        for (const PayloadBuffers* got : {&stateless, &explicit_q, &stateful}) {
          EXPECT_EQ(got->indices, expected.indices);
          ASSERT_EQ(got->values.size(), expected.values.size());
          for (std::size_t i = 0; i < got->values.size(); ++i) {
            EXPECT_EQ(std::bit_cast<std::uint32_t>(got->values[i]),
                      std::bit_cast<std::uint32_t>(expected.values[i]));
          }
        }
      }
    }
  }
}

TEST(RegTopKCodec, SelectsByRegularisedScoreAndSendsTheValues) {
  // k = 1 of 3: |a| orders 0 > 1 > 2, but coordinate 0's last aggregate cancelled the worker's
  // contribution (Delta = -1: weight 0), so coordinate 1 goes.
  const TensorLayout layout = Layout({3});
  const RegTopKParams params = RegParams(0.34f);
  Encoded got = EncodeWith(params, layout, {-1.0f, kQ, kQ}, {-3.0f, 2.0f, 1.0f});
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.indices, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(got.values, (std::vector<float>{2.0f}));
  // A smaller |1 + Delta| weighs less: tanh(0.5 / 4) * 3 = 0.37 < tanh(2.5e7) * 1 = 1 ...
  got = EncodeWith(params, layout, {-0.5f, 0.0f, kQ}, {-3.0f, 2.0f, 1.0f});
  EXPECT_EQ(got.indices, (std::vector<std::uint32_t>{2}));
  // ... while tanh(8 / 4) * 3 = 2.89 > tanh(1 / 4) * 2 = 0.49 and 1: coordinate 0.
  got = EncodeWith(params, layout, {7.0f, 0.0f, kQ}, {-3.0f, 2.0f, 1.0f});
  EXPECT_EQ(got.indices, (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(got.values, (std::vector<float>{-3.0f}));
  // Equal scores: the lower index.
  got = EncodeWith(params, layout, {1.0f, -3.0f, kQ}, {-2.0f, 2.0f, 0.5f});
  EXPECT_EQ(got.indices, (std::vector<std::uint32_t>{0}));
}

TEST(RegTopKCodec, MatchesTheScoreSortForRandomPosteriors) {
  const TensorLayout layout = Layout({50, 200, 9});
  const std::size_t d = layout.dimension();
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> spread(-3.0f, 3.0f);
  for (const float mu : {0.5f, 4.0f, 20.0f}) {
    for (const float ratio : {0.05f, 0.3f, 0.6f}) {
      for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(testing::Message() << "mu=" << mu << " ratio=" << ratio << " seed=" << seed);
        const std::vector<float> a = TiedInput(d, seed);
        std::vector<float> delta(d);
        for (std::size_t j = 0; j < d; ++j) delta[j] = j % 4 == 0 ? kQ : spread(rng);
        const RegTopKParams params = RegParams(ratio, mu);
        const Encoded got = EncodeWith(params, layout, delta, a);
        ASSERT_TRUE(got.status.ok());
        ASSERT_EQ(got.indices, ReferenceSelection(params, layout, delta, a));
        for (std::size_t i = 0; i < got.indices.size(); ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got.values[i]),
                    std::bit_cast<std::uint32_t>(a[got.indices[i]]));
        }
      }
    }
  }
}

TEST(RegTopKCodec, DecodesLikeTopK) {
  const TensorLayout layout = Layout({10, 6});
  const RegTopKParams params = RegParams(0.5f);
  const std::vector<float> a = TiedInput(16, 4);
  std::vector<float> delta(16, kQ);
  delta[3] = -1.0f;
  const Encoded got = EncodeWith(params, layout, delta, a);
  ASSERT_TRUE(got.status.ok());
  const PayloadView view(got.indices, got.values, {}, {});
  std::vector<float> reg_sum(16, 1.0f), top_sum(16, 1.0f);
  ASSERT_TRUE(RegTopKCodec::DecodeAdd(params, layout, {}, view, 0.5f, reg_sum, {}).ok());
  ASSERT_TRUE(TopKCodec::DecodeAdd({.k_ratio = 0.5f}, layout, {}, view, 0.5f, top_sum, {}).ok());
  EXPECT_EQ(reg_sum, top_sum);
  // Malformed payloads are Top-k's: repeated index.
  std::vector<std::uint32_t> bad = got.indices;
  bad[1] = bad[0];
  EXPECT_EQ(RegTopKCodec::DecodeAdd(params, layout, {}, PayloadView(bad, got.values, {}, {}), 1.0f,
                                    reg_sum, {}),
            Status::DataLoss());
}

TEST(RegTopKCodec, RejectsBadParametersAndBuffers) {
  const TensorLayout layout = Layout({20});
  for (const float mu : {0.0f, -1.0f, kNaN, kInf}) {
    EXPECT_EQ(ValidateCodecParams(RegParams(0.5f, mu)), Status::InvalidArgument()) << mu;
    EXPECT_EQ(RegTopKCodec::Shape(RegParams(0.5f, mu), layout).status(),
              Status::InvalidArgument());
    EXPECT_EQ(RegTopKCodec::ScratchBytes(RegParams(0.5f, mu), layout), 0u);
  }
  for (const float q : {0.0f, -5.0f, kNaN, kInf}) {
    EXPECT_EQ(ValidateCodecParams(RegParams(0.5f, 4.0f, q)), Status::InvalidArgument()) << q;
  }
  for (const float ratio : {0.0f, 1.5f, kNaN}) {
    EXPECT_EQ(ValidateCodecParams(RegParams(ratio)), Status::InvalidArgument()) << ratio;
  }
  EXPECT_TRUE(ValidateCodecParams(RegParams(0.5f, 1e-3f, 1.0f)).ok());
  EXPECT_EQ(CodecName(kCodecId<RegTopKCodec>), "reg_top_k");
  EXPECT_EQ(DefaultCodecParams("reg_top_k").value(), CodecParams(RegTopKParams{}));

  const RegTopKParams params = RegParams(0.5f);
  const std::vector<float> a(20, 1.0f);
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  EXPECT_EQ(RegTopKCodec::EncodeWithDistortion(params, layout, std::vector<float>(19, kQ), a,
                                               payload.spans(), scratch),
            Status::InvalidArgument());
  EXPECT_EQ(RegTopKCodec::EncodeWithDistortion(params, layout, {}, std::vector<float>(21),
                                               payload.spans(), scratch),
            Status::InvalidArgument());
  EXPECT_EQ(RegTopKCodec::EncodeWithDistortion(
                params, layout, {}, a, payload.spans(),
                std::span<std::byte>(scratch).first(scratch.size() - 1)),
            Status::ResourceExhausted());

  // The selector's state is one posterior value per coordinate; one of another size, or bad
  // parameters, are refused and change nothing.
  EXPECT_EQ(RegTopKCodec::SelectorStateFloats(params, layout), 20u);
  std::vector<float> values(20, kQ);
  SelectorState state{.values = std::span(values).first(19)};
  EXPECT_EQ(RegTopKCodec::SelectorEncode(params, layout, state, a, payload.spans(), scratch),
            Status::InvalidArgument());
  state.values = values;
  EXPECT_EQ(RegTopKCodec::SelectorEncode(RegParams(0.5f, 0.0f), layout, state, a, payload.spans(),
                                         scratch),
            Status::InvalidArgument());
  EXPECT_FALSE(state.awaiting_aggregate);
  EXPECT_EQ(values, std::vector<float>(20, kQ));
}

TEST(RegTopKSelector, PosteriorUpdateFollowsTheRule) {
  const TensorLayout layout = Layout({6});
  const RegTopKParams params = RegParams(0.5f);  // k = 3
  Selector s(layout, params);
  ASSERT_EQ(s.posterior().size(), 6u);
  for (const float delta : s.posterior()) EXPECT_EQ(delta, kQ);

  // Selected by |a|: 0 (4), 2 (-2), 5 (0.5).
  const std::vector<float> a = {4.0f, 0.0f, -2.0f, 0.0f, 0.25f, 0.5f};
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  ASSERT_TRUE(s.Encode(a, payload.spans(), scratch).ok());
  ASSERT_EQ(payload.indices, (std::vector<std::uint32_t>{0, 2, 5}));
  EXPECT_TRUE(s.awaiting_aggregate());
  EXPECT_TRUE(s.posterior().empty());

  // n = 4 workers; ghat: coordinate 0 cancelled (sum 0), coordinate 2 doubled (sum -4),
  // coordinate 5 reversed (sum -0.5); unsent coordinates keep Q whatever ghat says.
  const std::vector<float> ghat = {0.0f, 3.0f, -1.0f, 0.0f, 7.0f, -0.125f};
  ASSERT_TRUE(s.Observe(ghat, 4).ok());
  EXPECT_FALSE(s.awaiting_aggregate());
  const std::vector<float> expected = {-1.0f, kQ, 1.0f, kQ, kQ, -2.0f};
  EXPECT_EQ(std::vector<float>(s.posterior().begin(), s.posterior().end()), expected);
  // No second report for the same round.
  EXPECT_EQ(s.Observe(ghat, 4), Status::FailedPrecondition());

  // The next selection uses it: coordinate 0 (weight 0) yields to 4.
  ASSERT_TRUE(s.Encode(a, payload.spans(), scratch).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{2, 4, 5}));
}

TEST(RegTopKSelector, GuardsTheDivision) {
  const TensorLayout layout = Layout({4});
  const RegTopKParams params = RegParams(0.5f);  // k = 2
  Selector s(layout, params);
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  // All zero but one: a zero is selected (index 0 by the tie rule), so s = 0 there: Q.
  ASSERT_TRUE(s.Encode(std::vector<float>{0.0f, 0.0f, 0.0f, 2.0f}, payload.spans(), scratch).ok());
  ASSERT_EQ(payload.indices, (std::vector<std::uint32_t>{0, 3}));
  ASSERT_TRUE(s.Observe(std::vector<float>{5.0f, 1.0f, 1.0f, 1.0f}, 2).ok());
  EXPECT_EQ(Copy(s.posterior()).at(0), kQ);
  EXPECT_EQ(Copy(s.posterior()).at(3), 0.0f);

  // A denormal contribution under a huge aggregate: the ratio overflows to inf -> Q, not inf.
  const float tiny = std::numeric_limits<float>::denorm_min();
  s.Reset();  // weight 1 everywhere, so the denormal scores stay nonzero
  ASSERT_TRUE(s.Encode(std::vector<float>{tiny, 0.0f, 0.0f, tiny}, payload.spans(), scratch).ok());
  ASSERT_TRUE(s.Observe(std::vector<float>{1e30f, 0.0f, 0.0f, tiny}, 3).ok());
  EXPECT_EQ(Copy(s.posterior()).at(0), kQ);
  EXPECT_EQ(Copy(s.posterior()).at(3), 2.0f);

  // No contributors: no aggregate, no posterior.
  ASSERT_TRUE(s.Encode(std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f}, payload.spans(), scratch).ok());
  ASSERT_TRUE(s.Observe(std::vector<float>(4, 0.0f), 0).ok());
  for (const float delta : s.posterior()) EXPECT_EQ(delta, kQ);

  // Wrong sizes change nothing.
  ASSERT_TRUE(s.Encode(std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f}, payload.spans(), scratch).ok());
  EXPECT_EQ(s.Observe(std::vector<float>(3), 1), Status::InvalidArgument());
  EXPECT_EQ(s.ObserveChange(std::vector<float>(4), std::vector<float>(5), 1),
            Status::InvalidArgument());
  EXPECT_TRUE(s.awaiting_aggregate());
}

TEST(RegTopKSelector, ModelChangeIsTheAggregate) {
  const TensorLayout layout = Layout({5});
  const RegTopKParams params = RegParams(0.6f);  // k = 3
  Selector by_mean(layout, params), by_model(layout, params);
  const std::vector<float> a = {1.0f, -2.0f, 0.5f, 4.0f, -0.25f};
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  ASSERT_TRUE(by_mean.Encode(a, payload.spans(), scratch).ok());
  ASSERT_TRUE(by_model.Encode(a, payload.spans(), scratch).ok());
  const std::vector<float> before = {10.0f, 10.0f, 10.0f, 10.0f, 10.0f};
  const std::vector<float> after = {9.5f, 11.0f, 10.0f, 8.0f, 10.5f};
  std::vector<float> ghat(5);
  for (std::size_t j = 0; j < 5; ++j) ghat[j] = before[j] - after[j];
  ASSERT_TRUE(by_mean.Observe(ghat, 3).ok());
  ASSERT_TRUE(by_model.ObserveChange(before, after, 3).ok());
  const std::vector<float> expected = {(1.5f - 1.0f) / 1.0f, (-3.0f + 2.0f) / -2.0f, kQ,
                                       (6.0f - 4.0f) / 4.0f, kQ};
  EXPECT_EQ(std::vector<float>(by_mean.posterior().begin(), by_mean.posterior().end()), expected);
  EXPECT_EQ(std::vector<float>(by_model.posterior().begin(), by_model.posterior().end()), expected);
}

TEST(RegTopKSelector, MissedAggregateMeansNoPosterior) {
  const TensorLayout layout = Layout({4});
  const RegTopKParams params = RegParams(0.25f);  // k = 1
  Selector s(layout, params);
  PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
  std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
  const std::vector<float> a = {3.0f, 1.0f, 0.0f, 0.0f};
  ASSERT_TRUE(s.Encode(a, payload.spans(), scratch).ok());
  ASSERT_TRUE(s.Observe(std::vector<float>(4, 0.0f), 2).ok());
  ASSERT_EQ(Copy(s.posterior()).at(0), -1.0f);
  ASSERT_TRUE(s.Encode(a, payload.spans(), scratch).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{1}));
  // This round's aggregate never arrives: the next selection is Top-k's again.
  ASSERT_TRUE(s.Encode(a, payload.spans(), scratch).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{0}));
  s.Reset();
  EXPECT_FALSE(s.awaiting_aggregate());
  for (const float delta : s.posterior()) EXPECT_EQ(delta, kQ);
}

// Two workers whose pushes on coordinate 0 cancel (the toy of experiment B, in miniature):
// Top-1 with error accumulation keeps sending the cancelling coordinate, RegTop-1 learns from
// the aggregate and sends the one that moves the model.
TEST(RegTopKSelector, LearnsToSkipCancellingCoordinates) {
  const TensorLayout layout = Layout({2});
  const RegTopKParams params = RegParams(0.5f);  // k = 1
  const std::vector<std::vector<float>> gradients = {{1.0f, 0.1f}, {-1.0f, 0.1f}};
  for (const bool regularised : {false, true}) {
    SCOPED_TRACE(regularised);
    Selector first(layout, params), second(layout, params);
    Selector* selectors[2] = {&first, &second};
    std::vector<std::vector<float>> residual(2, std::vector<float>(2, 0.0f));
    std::vector<std::byte> scratch(RegTopKCodec::ScratchBytes(params, layout));
    float moved = 0.0f;  // total aggregate on coordinate 1 over the rounds
    for (int round = 0; round < 5; ++round) {
      std::vector<float> sum(2, 0.0f);
      for (std::size_t i = 0; i < 2; ++i) {
        for (std::size_t j = 0; j < 2; ++j) residual[i][j] += gradients[i][j];
        PayloadBuffers payload(RegTopKCodec::Shape(params, layout).value());
        ASSERT_TRUE(selectors[i]->Encode(residual[i], payload.spans(), scratch).ok());
        const std::uint32_t j = payload.indices[0];
        sum[j] += payload.values[0];
        residual[i][j] = 0.0f;
      }
      const std::vector<float> ghat = {sum[0] / 2.0f, sum[1] / 2.0f};
      moved += ghat[1];
      for (std::size_t i = 0; i < 2; ++i) {
        if (regularised) {
          ASSERT_TRUE(selectors[i]->Observe(ghat, 2).ok());
        } else {
          selectors[i]->Reset();
        }
      }
    }
    if (regularised) {
      EXPECT_GT(moved, 0.3f);  // coordinate 1 from round 1 on
    } else {
      EXPECT_EQ(moved, 0.0f);  // coordinate 0 every round, summing to 0
    }
  }
}

TEST(RegTopKSelector, ErrorFeedbackWorkerKeepsThePosterior) {
  const TensorLayout layout = Layout({8});
  const CodecParams codec = RegParams(0.25f);  // k = 2
  FeedbackParams feedback;
  feedback.kind = FeedbackKind::kEf;
  feedback.learning_rate = 1.0f;
  feedback.momentum = 0.0f;
  ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
  EXPECT_EQ(ErrorFeedbackWorker::SelectionStateBytes(layout, codec),
            ArenaBytesFor<float>(8));
  EXPECT_EQ(ErrorFeedbackWorker::SelectionStateBytes(layout, TopKParams{.k_ratio = 0.25f}), 0u);
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
  EXPECT_EQ(box.arena.used_bytes(), ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
  PayloadBuffers payload(EncodedShape(codec, layout).value());
  const std::vector<float> model(8, 0.0f);
  const std::vector<float> gradient = {8.0f, 7.0f, 6.0f, 5.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  ASSERT_TRUE(worker.BeginRound(model).ok());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  ASSERT_TRUE(worker.Compress({}, payload.spans()).ok());
  ASSERT_EQ(payload.indices, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_TRUE(worker.selector_state().empty());
  // The server's model moved by -ghat: coordinate 0 cancelled, coordinate 1 as sent (n = 1).
  std::vector<float> after = model;
  after[1] = -7.0f;
  ASSERT_TRUE(worker.ObserveModelChange(model, after, 1).ok());
  ASSERT_EQ(Copy(worker.selector_state()).at(0), -1.0f);
  ASSERT_EQ(Copy(worker.selector_state()).at(1), 0.0f);
  // p = g + e = (8, 7, 12, 10): scores 0, tanh(1/4)*7 = 1.7, 12, 10 -> 2 and 3.
  ASSERT_TRUE(worker.BeginRound(model).ok());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  ASSERT_TRUE(worker.Compress({}, payload.spans()).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{2, 3}));
  // A missed round: the selector forgets.
  worker.ForgetAggregate();
  for (const float delta : worker.selector_state()) EXPECT_EQ(delta, kQ);
  // Other codecs ignore the reports.
  ErrorFeedbackWorker top;
  ArenaBox top_box(ErrorFeedbackWorker::StateBytes(layout, TopKParams{.k_ratio = 0.25f}, feedback));
  ASSERT_TRUE(
      top.Init(top_box.arena, AllCodecs(), layout, TopKParams{.k_ratio = 0.25f}, feedback).ok());
  EXPECT_TRUE(top.ObserveAggregate(model, 1).ok());
  EXPECT_TRUE(top.selector_state().empty());
}

}  // namespace
}  // namespace edgesgd
