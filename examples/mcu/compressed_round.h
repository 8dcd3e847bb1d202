#pragma once

// The round of the images that train alone but upload exactly what a federated worker would
// (train_10k, train_cnn): the gradient at the model, one ErrorFeedbackWorker step compressed
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
};

// One round; returns the Update frame's size. Not inlined, so its locals occupy the stack only
// while a round runs. Errors: those of the worker, the model, the frame builder and decoder.
Result<std::size_t> RunRound(const CompressedRound& run, std::uint32_t round,
                             wire::FrameBuilder& builder);

}  // namespace edgesgd::mcu
