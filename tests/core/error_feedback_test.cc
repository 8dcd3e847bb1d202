#include "edgesgd/core/error_feedback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/optimizer.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

using namespace test_util;  // NOLINT: the core tests' shared helpers

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool SamePayloadBits(const PayloadBuffers& a, const PayloadBuffers& b) {
  return a.indices == b.indices && a.words == b.words && SameBits(a.values, b.values) &&
         SameBits(a.scales, b.scales);
}

TensorLayout TestLayout() {
  const std::uint64_t sizes[] = {37, 100, 5};
  return TensorLayout::FromSizes(sizes).value();
}

// One configuration per codec, lossy enough that the residual matters.
std::vector<CodecParams> LossyCodecs() {
  return test_util::EveryCodec(
      {.k_ratio = 0.1f, .block_ratio = 8, .qsgd_levels = 7, .qsgd_bucket = 32});
}

// A noisy quadratic per worker: grad_i(z)_j = a_j (z_j - b_ij) + noise(worker, step, j).
void Gradient(std::uint32_t worker, std::uint32_t step, std::span<const float> z,
              std::span<float> g) {
  CounterRng target(7, 0, worker, StreamId(RandomPurpose::kUser, worker));
  CounterRng noise(11, step, worker, StreamId(RandomPurpose::kDataSampling, worker));
  for (std::size_t j = 0; j < z.size(); ++j) {
    const float a = 0.5f + 0.25f * static_cast<float>(j % 7);
    const float b = 4.0f * target.NextFloat() - 2.0f;
    g[j] = a * (z[j] - b) + 0.2f * (noise.NextFloat() - 0.5f);
  }
}

std::vector<float> InitialModel(std::size_t d) {
  std::vector<float> x(d);
  CounterRng rng(3, 0, 0, StreamId(RandomPurpose::kModelInit));
  for (float& v : x) v = 2.0f * rng.NextFloat() - 1.0f;
  return x;
}

FeedbackParams Feedback(FeedbackKind kind, float detach, std::uint32_t local_steps = 1) {
  FeedbackParams params;
  params.kind = kind;
  params.detach = detach;
  params.learning_rate = 0.05f;
  params.momentum = 0.9f;
  params.weight_decay = 1e-3f;
  params.local_steps = local_steps;
  return params;
}

// A worker with its own arena and payload buffers that trains a model alone:
// x -= C(p) after every round (a one-worker server).
class SoloRun {
 public:
  SoloRun(const TensorLayout& layout, const CodecParams& codec, const FeedbackParams& feedback)
      : layout_(layout),
        codec_(codec),
        box_(ErrorFeedbackWorker::StateBytes(layout, codec, feedback)),
        payload_(EncodedShape(codec, layout).value()),
        model_(InitialModel(layout.dimension())),
        gradient_(layout.dimension()),
        decoded_(layout.dimension()) {
    init_status_ = worker_.Init(box_.arena, AllCodecs(), layout, codec, feedback);
  }

  Status init_status() const { return init_status_; }

  // One round; returns the decoded send C(p) in decoded().
  void Round(std::uint32_t round) {
    ASSERT_TRUE(worker_.BeginRound(model_).ok());
    for (std::uint32_t s = 0; s < worker_.params().local_steps; ++s) {
      Gradient(0, round * 16 + s, worker_.GradientPoint(), gradient_);
      ASSERT_TRUE(worker_.LocalStep(gradient_).ok());
    }
    const CodecContext context{42, round, 0};
    const Result<PayloadShape> shape = worker_.Compress(context, payload_.spans());
    ASSERT_TRUE(shape.ok());
    decoded_ = DecodeDense(codec_, layout_, context, payload_.view());
    for (std::size_t i = 0; i < model_.size(); ++i) model_[i] -= decoded_[i];
  }

  ErrorFeedbackWorker& worker() { return worker_; }
  const std::vector<float>& model() const { return model_; }
  const std::vector<float>& decoded() const { return decoded_; }
  const PayloadBuffers& payload() const { return payload_; }

 private:
  TensorLayout layout_;
  CodecParams codec_;
  ArenaBox box_;
  ErrorFeedbackWorker worker_;
  PayloadBuffers payload_;
  std::vector<float> model_;
  std::vector<float> gradient_;
  std::vector<float> decoded_;
  Status init_status_;
};

TEST(ErrorFeedbackTest, DefWithZeroDetachReproducesEfBitForBit) {
  const TensorLayout layout = TestLayout();
  for (const CodecParams& codec : LossyCodecs()) {
    for (const std::uint32_t local_steps : {1u, 3u}) {
      SCOPED_TRACE(CodecName(codec));
      SCOPED_TRACE(local_steps);
      // EF ignores `detach`; give it a different value to prove it.
      SoloRun ef(layout, codec, Feedback(FeedbackKind::kEf, 0.7f, local_steps));
      SoloRun def(layout, codec, Feedback(FeedbackKind::kDef, 0.0f, local_steps));
      ASSERT_TRUE(ef.init_status().ok());
      ASSERT_TRUE(def.init_status().ok());
      for (std::uint32_t round = 0; round < 100; ++round) {
        ef.Round(round);
        def.Round(round);
        ASSERT_TRUE(SamePayloadBits(ef.payload(), def.payload())) << "round " << round;
        ASSERT_TRUE(SameBits(ef.model(), def.model())) << "round " << round;
        ASSERT_TRUE(SameBits(ef.worker().residual(), def.worker().residual()));
        ASSERT_TRUE(SameBits(ef.worker().momentum(), def.worker().momentum()));
      }
    }
  }
}

// The DEF of docs/algorithms.md §2 written out with plain vectors for n workers, against
// ErrorFeedbackWorker + MeanAggregator: the same floats, bit for bit.
TEST(ErrorFeedbackTest, MatchesReferenceDefRoundForEveryCodec) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  constexpr std::uint32_t kWorkers = 4;
  for (const CodecParams& codec : LossyCodecs()) {
    SCOPED_TRACE(CodecName(codec));
    const FeedbackParams feedback = Feedback(FeedbackKind::kDef, 0.3f);
    const float c = feedback.detach;
    const float lr = feedback.learning_rate;
    const float beta = feedback.momentum;
    const float wd = feedback.weight_decay;

    std::vector<std::unique_ptr<ArenaBox>> boxes;
    std::vector<ErrorFeedbackWorker> workers(kWorkers);
    for (auto& worker : workers) {
      boxes.push_back(
          std::make_unique<ArenaBox>(ErrorFeedbackWorker::StateBytes(layout, codec, feedback)));
      ASSERT_TRUE(worker.Init(boxes.back()->arena, AllCodecs(), layout, codec, feedback).ok());
    }
    ArenaBox server_box(MeanAggregator::StateBytes(layout, codec));
    MeanAggregator server;
    ASSERT_TRUE(server.Init(server_box.arena, AllCodecs(), layout, codec).ok());
    std::vector<float> x = InitialModel(d);

    std::vector<float> ref_x = x;
    std::vector<std::vector<float>> ref_e(kWorkers, std::vector<float>(d, 0.0f));
    std::vector<std::vector<float>> ref_m(kWorkers, std::vector<float>(d, 0.0f));

    const PayloadShape shape = EncodedShape(codec, layout).value();
    PayloadBuffers payload(shape);
    PayloadBuffers ref_payload(shape);
    std::vector<float> gradient(d);
    std::vector<float> point(d);
    std::vector<float> p(d);
    std::vector<std::byte> scratch(CodecScratchBytes(codec, layout));

    for (std::uint32_t round = 0; round < 30; ++round) {
      server.Reset();
      std::vector<float> ref_sum(d, 0.0f);
      for (std::uint32_t i = 0; i < kWorkers; ++i) {
        const CodecContext context{99, round, i};
        // Library.
        ASSERT_TRUE(workers[i].BeginRound(x).ok());
        Gradient(i, round, workers[i].GradientPoint(), gradient);
        ASSERT_TRUE(workers[i].LocalStep(gradient).ok());
        ASSERT_TRUE(workers[i].Compress(context, payload.spans()).ok());
        ASSERT_TRUE(server.Add(payload.view(), context).ok());
        // Reference.
        for (std::size_t j = 0; j < d; ++j) point[j] = ref_x[j] - c * ref_e[i][j];
        Gradient(i, round, point, gradient);
        for (std::size_t j = 0; j < d; ++j) {
          const float g = gradient[j] + wd * point[j];
          ref_m[i][j] = beta * ref_m[i][j] + g;
          p[j] = lr * ref_m[i][j] + ref_e[i][j];
        }
        ASSERT_TRUE(
            AllCodecs().Encode(codec, layout, context, p, ref_payload.spans(), scratch).ok());
        const std::vector<float> sent = DecodeDense(codec, layout, context, ref_payload.view());
        for (std::size_t j = 0; j < d; ++j) {
          ref_e[i][j] = p[j] - sent[j];
          ref_sum[j] += sent[j];
        }
        ASSERT_TRUE(SamePayloadBits(payload, ref_payload)) << "round " << round;
        ASSERT_TRUE(SameBits(workers[i].residual(), ref_e[i])) << "round " << round;
      }
      ASSERT_TRUE(server.AddScaledMean(-1.0f, x).ok());
      for (std::size_t j = 0; j < d; ++j) ref_x[j] -= ref_sum[j] / static_cast<float>(kWorkers);
      ASSERT_TRUE(SameBits(x, ref_x)) << "round " << round;
    }
  }
}

TEST(ErrorFeedbackTest, GradientPointIsDetachedFromTheSyncedModel) {
  const TensorLayout layout = TestLayout();
  const CodecParams codec = TopKParams{.k_ratio = 0.1f};
  struct Case {
    FeedbackKind kind;
    float detach;
    float expected_c;
  };
  for (const Case& test :
       {Case{FeedbackKind::kSaef, 0.2f, 1.0f}, Case{FeedbackKind::kDef, 0.3f, 0.3f},
        Case{FeedbackKind::kEf, 0.5f, 0.0f}}) {
    SoloRun run(layout, codec, Feedback(test.kind, test.detach));
    ASSERT_TRUE(run.init_status().ok());
    EXPECT_EQ(run.worker().detach(), test.expected_c);
    for (std::uint32_t round = 0; round < 5; ++round) run.Round(round);
    ASSERT_TRUE(run.worker().BeginRound(run.model()).ok());
    const std::span<const float> e = run.worker().residual();
    const std::span<const float> point = run.worker().GradientPoint();
    bool residual_nonzero = false;
    for (std::size_t j = 0; j < e.size(); ++j) {
      residual_nonzero |= e[j] != 0.0f;
      // SAEF: exactly the virtual model x - e.
      const float expected = test.kind == FeedbackKind::kSaef
                                 ? run.model()[j] - e[j]
                                 : run.model()[j] - test.expected_c * e[j];
      ASSERT_EQ(point[j], expected) << j;
    }
    EXPECT_TRUE(residual_nonzero);
  }
}

// EF conservation: everything the local steps produced was either sent or is still in the
// residual, sum_t C(p_t) + e_T = sum_t sum_s eta * m_{t,s}, for every codec, kind and H.
TEST(ErrorFeedbackTest, ConservesMassForEveryCodec) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  for (const CodecParams& codec : LossyCodecs()) {
    for (const FeedbackKind kind : {FeedbackKind::kEf, FeedbackKind::kDef, FeedbackKind::kSaef}) {
      for (const std::uint32_t local_steps : {1u, 4u}) {
        SCOPED_TRACE(CodecName(codec));
        SCOPED_TRACE(static_cast<int>(kind));
        SCOPED_TRACE(local_steps);
        const FeedbackParams feedback = Feedback(kind, 0.3f, local_steps);
        ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
        ErrorFeedbackWorker worker;
        ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
        PayloadBuffers payload(EncodedShape(codec, layout).value());
        std::vector<float> x = InitialModel(d);
        std::vector<float> gradient(d);
        std::vector<double> inputs(d, 0.0);
        std::vector<double> sent(d, 0.0);
        std::vector<double> magnitude(d, 0.0);
        for (std::uint32_t round = 0; round < 100; ++round) {
          ASSERT_TRUE(worker.BeginRound(x).ok());
          for (std::uint32_t s = 0; s < local_steps; ++s) {
            Gradient(0, round * 8 + s, worker.GradientPoint(), gradient);
            ASSERT_TRUE(worker.LocalStep(gradient).ok());
            for (std::size_t j = 0; j < d; ++j) {
              const float step = feedback.learning_rate * worker.momentum()[j];
              inputs[j] += static_cast<double>(step);
              magnitude[j] += std::fabs(static_cast<double>(step));
            }
          }
          const CodecContext context{5, round, 0};
          ASSERT_TRUE(worker.Compress(context, payload.spans()).ok());
          const std::vector<float> decoded = DecodeDense(codec, layout, context, payload.view());
          for (std::size_t j = 0; j < d; ++j) {
            sent[j] += static_cast<double>(decoded[j]);
            magnitude[j] += std::fabs(static_cast<double>(decoded[j]));
            x[j] -= decoded[j];
          }
          // A stateful selector (reg_top_k) learns from the aggregate; conservation must not
          // depend on what it selects.
          ASSERT_TRUE(worker.ObserveAggregate(decoded, 1).ok());
        }
        for (std::size_t j = 0; j < d; ++j) {
          const double lhs = sent[j] + static_cast<double>(worker.residual()[j]);
          // Each of the ~O(rounds) float operations on e rounds by at most one ulp of values
          // bounded by the total magnitude that passed through the coordinate.
          const double tolerance = 1e-5 * (1.0 + magnitude[j]);
          ASSERT_NEAR(lhs, inputs[j], tolerance) << "coordinate " << j;
        }
      }
    }
  }
}

TEST(ErrorFeedbackTest, NoFeedbackSendsTheDeltaAndKeepsNoResidual) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec;  // identity
  for (const std::uint32_t local_steps : {1u, 3u}) {
    const FeedbackParams feedback = Feedback(FeedbackKind::kNone, 0.5f, local_steps);
    ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
    ErrorFeedbackWorker worker;
    ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
    EXPECT_TRUE(worker.residual().empty());
    EXPECT_EQ(worker.detach(), 0.0f);
    PayloadBuffers payload(worker.payload_shape());
    const std::vector<float> x = InitialModel(d);
    std::vector<float> gradient(d);
    std::vector<float> delta(d, 0.0f);
    ASSERT_TRUE(worker.BeginRound(x).ok());
    EXPECT_TRUE(SameBits(worker.GradientPoint(), x));
    for (std::uint32_t s = 0; s < local_steps; ++s) {
      Gradient(1, s, worker.GradientPoint(), gradient);
      ASSERT_TRUE(worker.LocalStep(gradient).ok());
      for (std::size_t j = 0; j < d; ++j) delta[j] += feedback.learning_rate * worker.momentum()[j];
    }
    ASSERT_TRUE(worker.Compress({}, payload.spans()).ok());
    EXPECT_TRUE(SameBits(payload.values, delta));
    // A round without a step sends zeros, not the last round's delta.
    ASSERT_TRUE(worker.BeginRound(x).ok());
    ASSERT_TRUE(worker.Compress({}, payload.spans()).ok());
    EXPECT_TRUE(SameBits(payload.values, std::vector<float>(d, 0.0f)));
  }
}

// Two workers of one configuration, each in its own arena: two ways of driving the same rounds
// must give the same bits.
struct TwinWorkers {
  TwinWorkers(const TensorLayout& layout, const CodecParams& codec, const FeedbackParams& feedback)
      : first_box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback)),
        second_box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback)) {
    init = first.Init(first_box.arena, AllCodecs(), layout, codec, feedback);
    if (init.ok()) init = second.Init(second_box.arena, AllCodecs(), layout, codec, feedback);
  }
  ArenaBox first_box;
  ArenaBox second_box;
  ErrorFeedbackWorker first;
  ErrorFeedbackWorker second;
  Status init;
};

// A delta accumulated straight in the payload's values (identity, no residual) is the payload
// the ordinary path encodes, bit for bit: with one and several local steps, momentum, FedProx's
// term (which reads the delta) and a round without steps, whose payload is zeros.
TEST(ErrorFeedbackTest, ADeltaAccumulatedInThePayloadIsTheEncodedDelta) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec;  // identity
  for (const std::uint32_t local_steps : {1u, 3u}) {
    SCOPED_TRACE(local_steps);
    FeedbackParams feedback = Feedback(FeedbackKind::kNone, 0.0f, local_steps);
    feedback.prox_mu = 0.25f;
    TwinWorkers twins(layout, codec, feedback);
    ASSERT_TRUE(twins.init.ok());
    ErrorFeedbackWorker& copying = twins.first;
    ErrorFeedbackWorker& in_place = twins.second;
    ASSERT_TRUE(in_place.CanAccumulateInPayload());
    PayloadBuffers expected(copying.payload_shape());
    PayloadBuffers payload(in_place.payload_shape());
    std::vector<float> x = InitialModel(d);
    std::vector<float> gradient(d);
    for (std::uint32_t round = 0; round < 3; ++round) {
      ASSERT_TRUE(copying.BeginRound(x).ok());
      ASSERT_TRUE(in_place.BeginRound(x).ok());
      // Whatever the payload held before is not read: the first step writes it.
      std::fill(payload.values.begin(), payload.values.end(), kNaN);
      ASSERT_TRUE(in_place.AccumulateInPayload(payload.values).ok());
      const std::uint32_t steps = round == 1 ? 0 : local_steps;
      for (std::uint32_t s = 0; s < steps; ++s) {
        for (ErrorFeedbackWorker* worker : {&copying, &in_place}) {
          Gradient(2, round * 8 + s, worker->GradientPoint(), gradient);
          ASSERT_TRUE(worker->AddProximalGradient(gradient).ok());
          ASSERT_TRUE(worker->LocalStep(gradient).ok());
        }
      }
      ASSERT_TRUE(copying.Compress({}, expected.spans()).ok());
      ASSERT_TRUE(in_place.Compress({}, payload.spans()).ok());
      ASSERT_TRUE(SameBits(payload.values, expected.values)) << "round " << round;
      for (std::size_t j = 0; j < d; ++j) x[j] -= payload.values[j];
    }
  }
}

TEST(ErrorFeedbackTest, OnlyADenseRoundWithoutResidualAccumulatesInThePayload) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const std::vector<float> x = InitialModel(d);
  std::vector<float> values(d);
  std::vector<float> gradient(d, 1.0f);
  const auto refuses = [&](const CodecParams& codec, FeedbackKind kind) {
    const FeedbackParams feedback = Feedback(kind, 0.0f);
    ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
    ErrorFeedbackWorker worker;
    EXPECT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
    EXPECT_TRUE(worker.BeginRound(x).ok());
    EXPECT_FALSE(worker.CanAccumulateInPayload());
    EXPECT_EQ(worker.AccumulateInPayload(values), Status::FailedPrecondition());
  };
  refuses(CodecParams{}, FeedbackKind::kEf);  // a residual holds p
  refuses(LossyCodecs()[kCodecId<TopKCodec>], FeedbackKind::kNone);

  const FeedbackParams feedback = Feedback(FeedbackKind::kNone, 0.0f);
  ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, CodecParams{}, feedback));
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, CodecParams{}, feedback).ok());
  EXPECT_EQ(worker.AccumulateInPayload(values), Status::FailedPrecondition());  // no round
  ASSERT_TRUE(worker.BeginRound(x).ok());
  EXPECT_EQ(worker.AccumulateInPayload(std::span<float>(values).first(d - 1)),
            Status::InvalidArgument());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  EXPECT_EQ(worker.AccumulateInPayload(values), Status::FailedPrecondition());  // after a step
}

// Borrowing the synced model as the gradient point (H = 1, c = 0) reads it in place and changes
// no bit of what is sent or kept; every other configuration copies it as before.
TEST(ErrorFeedbackTest, ABorrowedGradientPointIsTheSyncedModelAndChangesNoBits) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = TopKParams{.k_ratio = 0.25f};
  using PointSource = ErrorFeedbackWorker::PointSource;
  for (const FeedbackKind kind : {FeedbackKind::kNone, FeedbackKind::kEf, FeedbackKind::kDef}) {
    for (const std::uint32_t local_steps : {1u, 3u}) {
      SCOPED_TRACE(testing::Message() << static_cast<int>(kind) << " H=" << local_steps);
      const FeedbackParams feedback = Feedback(kind, 0.5f, local_steps);
      TwinWorkers twins(layout, codec, feedback);
      ASSERT_TRUE(twins.init.ok());
      ErrorFeedbackWorker& copied = twins.first;
      ErrorFeedbackWorker& borrowed = twins.second;
      PayloadBuffers copied_payload(copied.payload_shape());
      PayloadBuffers borrowed_payload(borrowed.payload_shape());
      std::vector<float> x = InitialModel(d);
      std::vector<float> gradient(d);
      const bool borrows = local_steps == 1 && borrowed.detach() == 0.0f;
      for (std::uint32_t round = 0; round < 4; ++round) {
        ASSERT_TRUE(copied.BeginRound(x, PointSource::kCopy).ok());
        ASSERT_TRUE(borrowed.BeginRound(x, PointSource::kBorrow).ok());
        EXPECT_EQ(borrowed.GradientPoint().data() == x.data(), borrows);
        EXPECT_NE(copied.GradientPoint().data(), x.data());
        for (std::uint32_t s = 0; s < local_steps; ++s) {
          ASSERT_TRUE(SameBits(copied.GradientPoint(), borrowed.GradientPoint()));
          Gradient(1, s, copied.GradientPoint(), gradient);
          ASSERT_TRUE(copied.LocalStep(gradient).ok());
          ASSERT_TRUE(borrowed.LocalStep(gradient).ok());
        }
        const CodecContext context{7, round, 1};
        ASSERT_TRUE(copied.Compress(context, copied_payload.spans()).ok());
        ASSERT_TRUE(borrowed.Compress(context, borrowed_payload.spans()).ok());
        EXPECT_TRUE(SamePayloadBits(copied_payload, borrowed_payload));
        EXPECT_TRUE(SameBits(copied.residual(), borrowed.residual()));
        // The next round's model: what the one-worker server would make of it.
        for (std::size_t j = 0; j < d; ++j) x[j] -= 0.5f * gradient[j];
      }
    }
  }
}

// H local steps: the gradient point walks with the local model, the payload carries the sum
// of the steps (plus the residual), and the residual stays fixed during the round.
TEST(ErrorFeedbackTest, LocalStepsAccumulateTheModelDelta) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = RandomBlockParams{.block_ratio = 4};
  constexpr std::uint32_t kSteps = 5;
  for (const FeedbackKind kind : {FeedbackKind::kEf, FeedbackKind::kDef}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const FeedbackParams feedback = Feedback(kind, 0.5f, kSteps);
    SoloRun run(layout, codec, feedback);
    ASSERT_TRUE(run.init_status().ok());
    for (std::uint32_t round = 0; round < 3; ++round) run.Round(round);
    ErrorFeedbackWorker& worker = run.worker();
    const std::vector<float> e(worker.residual().begin(), worker.residual().end());
    const float c = worker.detach();

    ASSERT_TRUE(worker.BeginRound(run.model()).ok());
    std::vector<float> local = run.model();
    std::vector<float> delta(d, 0.0f);
    std::vector<float> gradient(d);
    for (std::uint32_t s = 0; s < kSteps; ++s) {
      for (std::size_t j = 0; j < d; ++j) {
        ASSERT_NEAR(worker.GradientPoint()[j], local[j] - c * e[j], 1e-5f) << s << " " << j;
      }
      Gradient(0, 1000 + s, worker.GradientPoint(), gradient);
      ASSERT_TRUE(worker.LocalStep(gradient).ok());
      EXPECT_EQ(worker.steps_taken(), s + 1);
      for (std::size_t j = 0; j < d; ++j) {
        const float step = feedback.learning_rate * worker.momentum()[j];
        local[j] -= step;
        delta[j] += step;
      }
      ASSERT_TRUE(SameBits(worker.residual(), e));
    }
    EXPECT_EQ(worker.LocalStep(gradient), Status::FailedPrecondition());

    PayloadBuffers payload(worker.payload_shape());
    const CodecContext context{42, 77, 0};
    ASSERT_TRUE(worker.Compress(context, payload.spans()).ok());
    const std::vector<float> sent = DecodeDense(codec, layout, context, payload.view());
    for (std::size_t j = 0; j < d; ++j) {
      ASSERT_NEAR(sent[j] + worker.residual()[j], delta[j] + e[j], 1e-5f) << j;
    }
    EXPECT_EQ(worker.Compress(context, payload.spans()).status(), Status::FailedPrecondition());
  }
}

// A 1-worker identity-codec EF run is heavy-ball SGD: same bits as Optimizer kMomentum.
// FedProx's term is mu times the local model's distance from the synced model, y - x, which the
// gradient point shows for c = 0: checked for each feedback kind that keeps y at the point, with
// and without momentum, at every step of a round.
TEST(ErrorFeedbackTest, ProximalGradientIsMuTimesTheLocalDrift) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const std::vector<float> synced = test_util::UniformVector(d, 5, 0, 1.0f);
  for (const FeedbackKind kind : {FeedbackKind::kNone, FeedbackKind::kEf}) {
    for (const float momentum : {0.0f, 0.9f}) {
      const FeedbackParams feedback{.kind = kind, .detach = 0.0f, .learning_rate = 0.1f,
                                    .momentum = momentum, .weight_decay = 0.0f,
                                    .local_steps = 4, .prox_mu = 0.5f};
      const CodecParams codec = LossyCodecs()[kCodecId<TopKCodec>];
      ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
      ErrorFeedbackWorker worker;
      ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
      ASSERT_TRUE(worker.BeginRound(synced).ok());
      std::vector<float> gradient(d);
      for (std::uint32_t step = 0; step < 4; ++step) {
        Gradient(0, step, worker.GradientPoint(), gradient);
        std::vector<float> expected = gradient;
        for (std::size_t i = 0; i < d; ++i) {
          expected[i] += 0.5f * (worker.GradientPoint()[i] - synced[i]);
        }
        ASSERT_TRUE(worker.AddProximalGradient(gradient).ok());
        for (std::size_t i = 0; i < d; ++i) {
          ASSERT_NEAR(gradient[i], expected[i], 1e-5f) << "step " << step << ", coordinate " << i;
        }
        if (step == 0) {
          EXPECT_TRUE(SameBits(gradient, expected));  // y = x: no term at all
        }
        ASSERT_TRUE(worker.LocalStep(gradient).ok());
      }
      // All H steps are taken: no step is left for a proximal gradient.
      EXPECT_EQ(worker.AddProximalGradient(gradient), Status::FailedPrecondition());
    }
  }
}

TEST(ErrorFeedbackTest, ProximalGradientWithoutMuOrRoundChangesNothing) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  FeedbackParams feedback{.kind = FeedbackKind::kNone, .learning_rate = 0.1f, .momentum = 0.0f,
                          .local_steps = 3};
  ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, CodecParams{}, feedback));
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, CodecParams{}, feedback).ok());
  std::vector<float> gradient = test_util::UniformVector(d, 6, 0, 1.0f);
  EXPECT_EQ(worker.AddProximalGradient(gradient), Status::FailedPrecondition());  // no round
  ASSERT_TRUE(worker.BeginRound(std::vector<float>(d, 1.0f)).ok());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  const std::vector<float> before = gradient;
  ASSERT_TRUE(worker.AddProximalGradient(gradient).ok());  // mu = 0
  EXPECT_TRUE(SameBits(gradient, before));
  std::vector<float> short_gradient(d - 1);
  EXPECT_EQ(worker.AddProximalGradient(short_gradient), Status::InvalidArgument());
  feedback.prox_mu = -1.0f;
  EXPECT_EQ(ValidateFeedbackParams(feedback), Status::InvalidArgument());
  feedback.prox_mu = kNaN;
  EXPECT_EQ(ValidateFeedbackParams(feedback), Status::InvalidArgument());
}

TEST(ErrorFeedbackTest, IdentityEfIsMomentumSgd) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const FeedbackParams feedback = Feedback(FeedbackKind::kEf, 0.0f);
  SoloRun run(layout, CodecParams{}, feedback);
  ASSERT_TRUE(run.init_status().ok());

  OptimizerParams params;
  params.kind = OptimizerKind::kMomentum;
  params.learning_rate = feedback.learning_rate;
  params.momentum = feedback.momentum;
  params.weight_decay = feedback.weight_decay;
  ArenaBox box(Optimizer::StateBytes(d, params));
  Optimizer optimizer;
  ASSERT_TRUE(optimizer.Init(box.arena, d, params).ok());
  std::vector<float> x = InitialModel(d);
  std::vector<float> gradient(d);
  for (std::uint32_t round = 0; round < 50; ++round) {
    run.Round(round);
    Gradient(0, round * 16, x, gradient);
    ASSERT_TRUE(optimizer.Step(x, gradient).ok());
    ASSERT_TRUE(SameBits(x, run.model())) << "round " << round;
    for (const float e : run.worker().residual()) ASSERT_EQ(e, 0.0f);
  }
}

TEST(ErrorFeedbackTest, AbandonedRoundIsCarriedInTheResidual) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec;  // identity: the residual is 0 after every completed round
  for (const std::uint32_t local_steps : {1u, 2u}) {
    const FeedbackParams feedback = Feedback(FeedbackKind::kSaef, 0.0f, local_steps);
    ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
    ErrorFeedbackWorker worker;
    ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
    const std::vector<float> x = InitialModel(d);
    std::vector<float> gradient(d);
    ASSERT_TRUE(worker.BeginRound(x).ok());
    Gradient(0, 0, worker.GradientPoint(), gradient);
    ASSERT_TRUE(worker.LocalStep(gradient).ok());
    std::vector<float> expected(d);
    for (std::size_t j = 0; j < d; ++j) expected[j] = feedback.learning_rate * worker.momentum()[j];
    ASSERT_TRUE(worker.BeginRound(x).ok());  // the round is abandoned
    EXPECT_TRUE(SameBits(worker.residual(), expected));
    ASSERT_TRUE(worker.BeginRound(x).ok());  // abandoned before its first step: nothing to carry
    EXPECT_TRUE(SameBits(worker.residual(), expected));
    // SAEF's next gradient point already accounts for the unsent progress.
    for (std::size_t j = 0; j < d; ++j) ASSERT_EQ(worker.GradientPoint()[j], x[j] - expected[j]);
  }
}

TEST(ErrorFeedbackTest, DeAveragedReadout) {
  const std::vector<float> x = {1.0f, 2.0f, -3.0f, 0.5f};
  const std::vector<float> e0 = {0.5f, -1.0f, 0.25f, 0.0f};
  const std::vector<float> e1 = {1.5f, 1.0f, 0.25f, 3.0f};
  const std::vector<float> e2 = {-0.5f, 3.0f, 1.0f, 0.0f};
  const std::span<const float> residuals[] = {e0, e1, e2};
  const std::vector<float> expected = {1.0f - 0.5f, 2.0f - 1.0f, -3.0f - 0.5f, 0.5f - 1.0f};

  std::vector<float> out(4);
  ASSERT_TRUE(DeAveragedReadout(x, residuals, out).ok());
  EXPECT_EQ(out, expected);
  std::vector<float> in_place = x;
  ASSERT_TRUE(DeAveragedReadout(in_place, residuals, in_place).ok());
  EXPECT_EQ(in_place, expected);

  const std::vector<float> mean = {0.5f, 1.0f, 0.5f, 1.0f};
  ASSERT_TRUE(DeAveragedReadoutFromMean(x, mean, out).ok());
  EXPECT_EQ(out, expected);

  // The caller-side mean can come from MeanAggregator::AddDense.
  const TensorLayout layout = TensorLayout::Single(4).value();
  ArenaBox box(MeanAggregator::StateBytes(layout, CodecParams{}));
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}).ok());
  for (const auto residual : residuals) ASSERT_TRUE(aggregator.AddDense(residual).ok());
  const Result<std::span<const float>> aggregated = aggregator.Mean();
  ASSERT_TRUE(aggregated.ok());
  ASSERT_TRUE(DeAveragedReadoutFromMean(x, aggregated.value(), out).ok());
  EXPECT_EQ(out, expected);

  const std::vector<float> short_residual = {1.0f};
  const std::span<const float> bad[] = {e0, short_residual};
  EXPECT_EQ(DeAveragedReadout(x, bad, out), Status::InvalidArgument());
  EXPECT_EQ(DeAveragedReadout(x, {}, out), Status::InvalidArgument());
  EXPECT_EQ(DeAveragedReadout(x, residuals, std::span<float>(out).first(3)),
            Status::InvalidArgument());
  EXPECT_EQ(DeAveragedReadoutFromMean(x, short_residual, out), Status::InvalidArgument());
}

TEST(ErrorFeedbackTest, StateBytesMatchesArenaUsage) {
  using CodecScratch = ErrorFeedbackWorker::CodecScratch;
  const TensorLayout layout = TestLayout();
  const std::size_t vector_bytes = ArenaBytesFor<float>(layout.dimension());
  for (const CodecParams& codec : LossyCodecs()) {
    for (const FeedbackKind kind :
         {FeedbackKind::kNone, FeedbackKind::kEf, FeedbackKind::kDef, FeedbackKind::kSaef}) {
      for (const std::uint32_t local_steps : {1u, 2u}) {
        for (const float detach : {0.0f, 0.3f}) {
          for (const float momentum : {0.9f, 0.0f}) {
            for (const CodecScratch source : {CodecScratch::kOwned, CodecScratch::kLent}) {
              FeedbackParams feedback = Feedback(kind, detach, local_steps);
              feedback.momentum = momentum;
              const std::size_t bytes =
                  ErrorFeedbackWorker::StateBytes(layout, codec, feedback, source);
              ArenaBox box(bytes);
              ErrorFeedbackWorker worker;
              ASSERT_TRUE(
                  worker.Init(box.arena, AllCodecs(), layout, codec, feedback, source).ok());
              EXPECT_EQ(box.arena.used_bytes(), bytes);
              // The documented plan: point, + momentum, + residual, + local, + delta,
              // + RegTop-k's posterior, + the codec's scratch unless it is lent.
              const bool error = kind != FeedbackKind::kNone;
              const bool local = local_steps > 1 && EffectiveDetach(feedback) > 0.0f;
              const bool delta = local_steps > 1 || !error;
              const bool posterior = std::holds_alternative<RegTopKParams>(codec);
              const std::size_t vectors = 1u + (momentum > 0.0f ? 1u : 0u) + (error ? 1u : 0u) +
                                          (local ? 1u : 0u) + (delta ? 1u : 0u) +
                                          (posterior ? 1u : 0u);
              const std::size_t scratch =
                  source == CodecScratch::kOwned ? ArenaBytes(CodecScratchBytes(codec, layout)) : 0;
              EXPECT_EQ(bytes, vectors * vector_bytes + scratch);
              EXPECT_EQ(worker.momentum().size(), momentum > 0.0f ? layout.dimension() : 0u);
            }
          }
        }
      }
    }
  }
  // H = 1 error feedback: three d-float buffers (plus scratch); two without momentum.
  static_assert(ErrorFeedbackWorker::StateBytes(TensorLayout::Single(1024).value(), CodecParams{},
                                                FeedbackParams{}) == 3 * 1024 * sizeof(float));
  static_assert(ErrorFeedbackWorker::StateBytes(TensorLayout::Single(1024).value(), CodecParams{},
                                                FeedbackParams{.momentum = 0.0f}) ==
                2 * 1024 * sizeof(float));
}

// Without momentum (beta = 0) and with the codec's scratch lent to Compress, the worker keeps
// no momentum buffer and still sends exactly what docs/algorithms.md §2 with m = beta * m + g
// does, for one and several local steps (every LocalStep loop): the reference keeps its m, the worker none.
TEST(ErrorFeedbackTest, ZeroMomentumWithLentScratchMatchesReference) {
  using CodecScratch = ErrorFeedbackWorker::CodecScratch;
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  struct Case {
    FeedbackKind kind;
    float detach;
    std::uint32_t local_steps;
  };
  for (const CodecParams& codec : LossyCodecs()) {
    for (const Case& test : {Case{FeedbackKind::kEf, 0.0f, 1}, Case{FeedbackKind::kSaef, 0.0f, 1},
                             Case{FeedbackKind::kEf, 0.0f, 3}, Case{FeedbackKind::kDef, 0.3f, 3}}) {
      SCOPED_TRACE(CodecName(codec));
      SCOPED_TRACE(static_cast<int>(test.kind));
      SCOPED_TRACE(test.local_steps);
      FeedbackParams feedback = Feedback(test.kind, test.detach, test.local_steps);
      feedback.momentum = 0.0f;
      const float c = EffectiveDetach(feedback);
      ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback, CodecScratch::kLent));
      ErrorFeedbackWorker worker;
      ASSERT_TRUE(
          worker.Init(box.arena, AllCodecs(), layout, codec, feedback, CodecScratch::kLent).ok());
      EXPECT_TRUE(worker.momentum().empty());
      const PayloadShape shape = EncodedShape(codec, layout).value();
      PayloadBuffers payload(shape);
      PayloadBuffers ref_payload(shape);
      std::vector<float> x = InitialModel(d);
      std::vector<float> ref_e(d, 0.0f);
      std::vector<float> ref_m(d, 0.0f);
      std::vector<float> local(d);
      std::vector<float> delta(d);
      std::vector<float> gradient(d);
      std::vector<float> point(d);
      std::vector<float> p(d);
      const std::size_t scratch_bytes = CodecScratchBytes(codec, layout);
      std::vector<std::byte> scratch(scratch_bytes);
      // Lent scratch: filled with garbage every round, as a reused gradient buffer would be.
      ArenaBox lent_box(ArenaBytes(scratch_bytes + kArenaAlignment));
      const std::span<std::byte> lent =
          lent_box.arena.AllocateBytes(scratch_bytes + kArenaAlignment).value();
      for (std::uint32_t round = 0; round < 30; ++round) {
        const CodecContext context{17, round, 0};
        ASSERT_TRUE(worker.BeginRound(x).ok());
        for (std::uint32_t s = 0; s < test.local_steps; ++s) {
          Gradient(0, round * 8 + s, worker.GradientPoint(), gradient);
          ASSERT_TRUE(worker.LocalStep(gradient).ok());
        }
        std::fill(lent.begin(), lent.end(), std::byte{0xA5});
        if (scratch_bytes > 0) {
          // Too little or misaligned scratch: refused before anything changes, then retried.
          EXPECT_EQ(
              worker.Compress(context, payload.spans(), lent.first(scratch_bytes - 1)).status(),
              Status::ResourceExhausted());
          EXPECT_EQ(worker.Compress(context, payload.spans(), lent.subspan(4)).status(),
                    Status::InvalidArgument());
        }
        ASSERT_TRUE(worker.Compress(context, payload.spans(), lent.subspan(kArenaAlignment)).ok());

        // Reference: the local steps as docs/algorithms.md §2 writes them, then p = e + delta.
        local = x;
        std::fill(delta.begin(), delta.end(), 0.0f);
        for (std::uint32_t s = 0; s < test.local_steps; ++s) {
          for (std::size_t j = 0; j < d; ++j) {
            point[j] = c > 0.0f ? local[j] - c * ref_e[j] : local[j];
          }
          Gradient(0, round * 8 + s, point, gradient);
          for (std::size_t j = 0; j < d; ++j) {
            const float g = gradient[j] + feedback.weight_decay * point[j];
            ref_m[j] = feedback.momentum * ref_m[j] + g;
            const float step = feedback.learning_rate * ref_m[j];
            local[j] -= step;
            delta[j] += step;
          }
        }
        for (std::size_t j = 0; j < d; ++j) p[j] = ref_e[j] + delta[j];
        ASSERT_TRUE(
            AllCodecs().Encode(codec, layout, context, p, ref_payload.spans(), scratch).ok());
        const std::vector<float> sent = DecodeDense(codec, layout, context, ref_payload.view());
        for (std::size_t j = 0; j < d; ++j) ref_e[j] = p[j] - sent[j];
        ASSERT_TRUE(SamePayloadBits(payload, ref_payload)) << "round " << round;
        ASSERT_TRUE(SameBits(worker.residual(), ref_e)) << "round " << round;
        for (std::size_t j = 0; j < d; ++j) x[j] -= sent[j];
      }
    }
  }
}

TEST(ErrorFeedbackTest, RejectsBadParameters) {
  const FeedbackParams good = Feedback(FeedbackKind::kDef, 0.3f);
  EXPECT_TRUE(ValidateFeedbackParams(good).ok());
  auto with = [&](auto change) {
    FeedbackParams params = good;
    change(params);
    return ValidateFeedbackParams(params);
  };
  for (const float detach : {-0.1f, 1.5f, kNaN}) {
    EXPECT_EQ(with([&](FeedbackParams& p) { p.detach = detach; }), Status::InvalidArgument());
  }
  // Only kDef reads detach.
  EXPECT_TRUE(with([](FeedbackParams& p) {
                p.kind = FeedbackKind::kSaef;
                p.detach = 7.0f;
              }).ok());
  for (const float lr : {0.0f, -0.1f, kInf, kNaN}) {
    EXPECT_EQ(with([&](FeedbackParams& p) { p.learning_rate = lr; }), Status::InvalidArgument());
  }
  for (const float beta : {1.0f, -0.1f, kNaN}) {
    EXPECT_EQ(with([&](FeedbackParams& p) { p.momentum = beta; }), Status::InvalidArgument());
  }
  for (const float wd : {-1e-4f, kInf, kNaN}) {
    EXPECT_EQ(with([&](FeedbackParams& p) { p.weight_decay = wd; }), Status::InvalidArgument());
  }
  EXPECT_EQ(with([](FeedbackParams& p) { p.local_steps = 0; }), Status::InvalidArgument());
  EXPECT_EQ(with([](FeedbackParams& p) { p.kind = static_cast<FeedbackKind>(9); }),
            Status::InvalidArgument());

  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec;
  const std::size_t bytes = ErrorFeedbackWorker::StateBytes(layout, codec, good);
  {
    ArenaBox box(bytes);
    ErrorFeedbackWorker worker;
    FeedbackParams bad = good;
    bad.local_steps = 0;
    EXPECT_EQ(worker.Init(box.arena, AllCodecs(), layout, codec, bad), Status::InvalidArgument());
    EXPECT_EQ(ErrorFeedbackWorker::StateBytes(layout, codec, bad), 0u);
    const CodecParams bad_codec = TopKParams{.k_ratio = 0.0f};
    EXPECT_EQ(worker.Init(box.arena, AllCodecs(), layout, bad_codec, good),
              Status::InvalidArgument());
    EXPECT_EQ(worker.Init(box.arena, AllCodecs(), TensorLayout(), codec, good),
              Status::InvalidArgument());
    EXPECT_EQ(worker.Init(box.arena, test_util::TopKOnlyCodecs(), layout, codec, good),
              Status::FailedPrecondition());
    EXPECT_EQ(box.arena.used_bytes(), 0u);
  }
  {
    ArenaBox box(bytes - kArenaAlignment);
    ErrorFeedbackWorker worker;
    EXPECT_EQ(worker.Init(box.arena, AllCodecs(), layout, codec, good),
              Status::ResourceExhausted());
    EXPECT_EQ(box.arena.used_bytes(), 0u);
    box.arena.Seal();
    EXPECT_EQ(worker.Init(box.arena, AllCodecs(), layout, codec, good),
              Status::FailedPrecondition());
  }
  ArenaBox box(bytes);
  ErrorFeedbackWorker worker;
  const std::vector<float> x(d, 1.0f);
  const std::vector<float> short_vector(d - 1, 1.0f);
  PayloadBuffers payload(EncodedShape(codec, layout).value());
  EXPECT_EQ(worker.BeginRound(x), Status::FailedPrecondition());
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, good).ok());
  EXPECT_EQ(worker.LocalStep(x), Status::FailedPrecondition());
  EXPECT_EQ(worker.Compress({}, payload.spans()).status(), Status::FailedPrecondition());
  EXPECT_EQ(worker.BeginRound(short_vector), Status::InvalidArgument());
  ASSERT_TRUE(worker.BeginRound(x).ok());
  EXPECT_EQ(worker.LocalStep(short_vector), Status::InvalidArgument());
  ASSERT_TRUE(worker.LocalStep(x).ok());
  EXPECT_EQ(worker.LocalStep(x), Status::FailedPrecondition());  // H = 1

  // Too small an output: refused without touching the state, then a retry succeeds.
  const std::vector<float> before(worker.residual().begin(), worker.residual().end());
  PayloadSpans small = payload.spans();
  small.values = small.values.first(d - 1);
  EXPECT_EQ(worker.Compress({}, small).status(), Status::ResourceExhausted());
  EXPECT_TRUE(SameBits(worker.residual(), before));
  const Result<PayloadShape> shape = worker.Compress({}, payload.spans());
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape.value(), EncodedShape(codec, layout).value());
  for (std::size_t j = 0; j < d; ++j) EXPECT_EQ(payload.values[j], before[j]);
}

}  // namespace
}  // namespace edgesgd
