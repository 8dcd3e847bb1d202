#pragma once

// The round of the images that train alone but upload exactly what a federated worker would
// (train_10k, train_cnn), their training loop and their verdict: the gradient at the model, one ErrorFeedbackWorker step compressed
// straight into a real Update frame (FrameBuilder), and the frame decoded (DecodeFrame) and
// applied to the model, x -= C(p), as a server would.
//
// One buffer holds the synced model between rounds and the gradient within one: with classic EF
// (c = 0) and one local step, GradientPoint() *is* the synced model until the next BeginRound
// (error_feedback.h), so the model is rebuilt from it after Compress instead of being kept twice.
// Between LocalStep and that rebuild the buffer is idle, so it is offered to Compress as the
// codec's scratch: a worker Init'ed with CodecScratch::kLent uses it, one that owns its scratch
// ignores it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/result.h"
#include "edgesgd/wire/frame_builder.h"
#include "fashion_slice.h"

namespace edgesgd::mcu {

// The rounds' worker: classic EF without momentum (no momentum buffer) and one local step, so
// GradientPoint() is the synced model (see above).
inline constexpr FeedbackParams kRoundFeedback{.kind = FeedbackKind::kEf,
                                               .detach = 0.0f,
                                               .learning_rate = 0.1f,
                                               .momentum = 0.0f,
                                               .weight_decay = 0.0f,
                                               .local_steps = 1};
// The rounds' codecs: top_k alone.
inline constexpr auto kRoundCodecOps = MakeCodecOps<TopKCodec>();
inline constexpr CodecRegistry kRoundCodecs(kRoundCodecOps);
inline constexpr std::uint64_t kRoundSeed = 7;

// An image's memory plan, from the components' own constexpr size functions.
struct RoundPlan {
  std::size_t dimension;
  std::uint32_t batch;
  ErrorFeedbackWorker::CodecScratch scratch;
  std::size_t feedback_bytes;
  std::size_t codec_scratch_bytes;  // within feedback_bytes unless lent from the vector
  std::size_t model_scratch_bytes;
  std::size_t vector_bytes;
  std::size_t builder_bytes;
  std::size_t batch_bytes;

  constexpr std::size_t total_bytes() const {
    return feedback_bytes + model_scratch_bytes + vector_bytes + builder_bytes + batch_bytes;
  }
};

constexpr RoundPlan PlanRound(const TensorLayout& layout, const CodecParams& codec,
                              ErrorFeedbackWorker::CodecScratch scratch,
                              std::size_t model_scratch_floats, std::uint32_t batch) {
  return {.dimension = layout.dimension(),
          .batch = batch,
          .scratch = scratch,
          .feedback_bytes = ErrorFeedbackWorker::StateBytes(layout, codec, kRoundFeedback, scratch),
          .codec_scratch_bytes = CodecScratchBytes(codec, layout),
          .model_scratch_bytes = ArenaBytesFor<float>(model_scratch_floats),
          .vector_bytes = ArenaBytesFor<float>(layout.dimension()),
          .builder_bytes = wire::FrameBuilderBytes(codec, layout),
          .batch_bytes = batch * (kImageFeatures * sizeof(float) + 1)};
}

// An image's globals, sized by its plan.
template <RoundPlan kPlan>
struct RoundStorage {
  static_assert(kPlan.feedback_bytes > 0 && kPlan.builder_bytes > 0);

  alignas(kArenaAlignment)
      std::array<std::byte, kPlan.feedback_bytes + kPlan.model_scratch_bytes> arena;
  // The synced model between rounds, the gradient within one, the codec's scratch in Compress
  // when lent.
  alignas(kArenaAlignment) std::array<float, kPlan.dimension> vector;
  alignas(kArenaAlignment) std::array<std::byte, kPlan.builder_bytes> builder_storage;
  std::array<float, kPlan.batch * kImageFeatures> batch_features;
  std::array<std::uint8_t, kPlan.batch> batch_labels;
  const ImageBuffers buffers{batch_features, batch_labels};
  ErrorFeedbackWorker worker;
  Model model;
};

// What a round works on: an image's globals and settings, by reference.
struct CompressedRound {
  ErrorFeedbackWorker& worker;
  Model& model;
  std::span<float> vector;  // the synced model between rounds, the gradient within one
  std::span<std::byte> arena;  // the worker's state and the model's scratch
  const ModelSpec& spec;
  ErrorFeedbackWorker::CodecScratch scratch;
  const CodecParams& codec;
  const TensorLayout& layout;
  std::uint32_t batch;
  const ImageSlice& train;
  const ImageBuffers& buffers;
  std::span<std::byte> builder_storage;  // the Update frame's (wire::FrameBuilderBytes)
};

// The round of `storage`'s globals, with the plan's batch and codec scratch.
template <RoundPlan kPlan>
constexpr CompressedRound MakeRound(RoundStorage<kPlan>& storage, const ModelSpec& spec,
                                    const TensorLayout& layout, const CodecParams& codec,
                                    const ImageSlice& train) {
  return {.worker = storage.worker,
          .model = storage.model,
          .vector = storage.vector,
          .arena = storage.arena,
          .spec = spec,
          .scratch = kPlan.scratch,
          .codec = codec,
          .layout = layout,
          .batch = kPlan.batch,
          .train = train,
          .buffers = storage.buffers,
          .builder_storage = storage.builder_storage};
}

// What a training run measured.
struct TrainingRecord {
  Evaluation first;  // the training loss before the first round
  Evaluation last;   // the last logged training loss, with the held-out accuracy
  std::size_t frame_bytes = 0;  // the last Update frame
  std::uint64_t train_ns = 0;   // time in rounds, evaluations excluded
};

// The training loss is followed on the first training images (see ImageSlice::First).
inline constexpr std::size_t kLossImages = 128;

// Inits the worker and the model from run.arena (then sealed) and the model's parameters into
// run.vector, runs `rounds` rounds, logging the loss on the first kLossImages of run.train before
// the first and every `log_every` rounds, then evaluates `test`.
// Errors: those of the worker, the model, the frame builder and decoder.
Status TrainRounds(const CompressedRound& run, std::uint32_t rounds, std::uint32_t log_every,
                   const ImageSlice& test, TrainingRecord& record);

// What an image requires of its run.
struct TrainingTargets {
  std::size_t ram_bytes;               // static RAM + stack peak
  std::size_t plan_bytes;              // the image's memory plan
  // Static RAM beyond the plan: the components' own objects, the platform's and newlib's
  // globals. Above this, something holds memory the plan does not know about.
  std::size_t unplanned_budget_bytes = 2048;
  float loss_factor;                   // first loss / last loss
  float accuracy_margin;               // held-out accuracy above chance
};

// After a run that failed with `trained`, logs why and returns 1. Otherwise logs the Update
// frame's size, the time per training sample, the memory use and each figure against its target;
// on success reports the pass and returns 0, otherwise logs the failure and returns 1.
int ReportTraining(const CompressedRound& run, const Status& trained, const TrainingRecord& record,
                   std::uint32_t rounds, const TrainingTargets& targets);

}  // namespace edgesgd::mcu
