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

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/result.h"
#include "edgesgd/wire/frame_builder.h"
#include "fashion_slice.h"

namespace edgesgd::mcu {

// What a round works on: an image's globals and settings, by reference.
struct CompressedRound {
  ErrorFeedbackWorker& worker;
  Model& model;
  std::span<float> vector;  // the synced model between rounds, the gradient within one
  const CodecRegistry& codecs;
  const CodecParams& codec;
  const TensorLayout& layout;
  std::uint64_t seed;
  std::uint32_t batch;
  const ImageSlice& train;
  const ImageBuffers& buffers;
  std::span<std::byte> builder_storage;  // the Update frame's (wire::FrameBuilderBytes)
};

// What a training run measured.
struct TrainingRecord {
  Evaluation first;  // the training loss before the first round
  Evaluation last;   // the last logged training loss, with the held-out accuracy
  std::size_t frame_bytes = 0;  // the last Update frame
  std::uint64_t train_ns = 0;   // time in rounds, evaluations excluded
};

// Runs `rounds` rounds from the model in run.vector (worker and model Init'ed), logging the
// loss on `loss_images` before the first and every `log_every` rounds, then evaluates `test`.
// Errors: those of the worker, the model, the frame builder and decoder.
Status TrainRounds(const CompressedRound& run, std::uint32_t rounds, std::uint32_t log_every,
                   const ImageSlice& loss_images, const ImageSlice& test, TrainingRecord& record);

// What an image requires of its run.
struct TrainingTargets {
  std::size_t ram_bytes;               // static RAM + stack peak
  std::size_t plan_bytes;              // the image's memory plan
  std::size_t unplanned_budget_bytes;  // static RAM beyond the plan: memory the plan misses
  float loss_factor;                   // first loss / last loss
  float accuracy_margin;               // held-out accuracy above chance
};

// Logs the Update frame's size, the time per training sample, the memory use and each figure
// against its target; on success reports the pass and returns 0, otherwise logs the failure and
// returns 1.
int ReportTraining(const CompressedRound& run, const TrainingRecord& record, std::uint32_t rounds,
                   const TrainingTargets& targets);

}  // namespace edgesgd::mcu
