#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model_spec.h"
#include "edgesgd/core/model/sequential_spec.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// The shape before every layer and after the last: at[0] is the input, at[l + 1] the output of
// layer l.
struct SequentialShapes {
  std::array<Shape, kMaxSequentialLayers + 1> at{};
};

// Parses a comma-separated list of layers (grammar in docs/models.md), e.g.
// "conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10", for `input` and `classes`, and
// validates the result (ValidateSequentialSpec). Errors: kInvalidArgument with the reason
// (unknown layer, bad number, missing or extra field, zero size, kernel larger than its input,
// output not matching classes, too many layers, too many parameters ...). Does not allocate.
Result<SequentialSpec> ParseSequentialSpec(std::string_view text, Shape input, std::size_t classes);

// Writes the canonical text of a valid spec into `out` (every field explicit, e.g.
// "conv:8:3:1:valid,relu,maxpool:2:2,dense:10") and returns the written prefix of `out`;
// parsing it gives the spec back. kMaxSequentialSpecChars always suffice. Errors:
// kInvalidArgument for an invalid spec, kResourceExhausted if `out` is too short.
Result<std::string_view> FormatSequentialSpec(const SequentialSpec& spec, std::span<char> out);

// Shape after each layer. Errors: kInvalidArgument for a bad input shape or layer count, a
// layer with a zero or unused field set, a kernel or window larger than its input, or an
// activation of 2^32 or more values.
Result<SequentialShapes> InferSequentialShapes(const SequentialSpec& spec);

// kOk if the spec describes a network: its shapes infer, classes is 2..256, the last layer has
// `classes` outputs and the parameter count is below 2^32; kInvalidArgument otherwise.
Status ValidateSequentialSpec(const SequentialSpec& spec);

// Number of parameters of a valid spec (0 for an invalid one).
std::size_t ParameterCount(const SequentialSpec& spec);

// Weights then bias of every dense, conv and dwconv layer, in layer order. Weight order:
// dense [units][inputs] (inputs in NHWC order), conv [filters][kernel_y][kernel_x][in channels],
// dwconv [kernel_y][kernel_x][channels]; biases one per output channel. Errors:
// kInvalidArgument for an invalid spec.
Result<TensorLayout> SequentialLayout(const SequentialSpec& spec);

// Writes the initial parameters into params (ParameterCount(spec) floats): weights of the last
// parametric layer, and of any not followed by relu/relu6 (looking past pooling and flatten),
// ~ U(-b, b), b = sqrt(6 / (fan_in + fan_out)) (Glorot); the others ~ U(-a, a), a = sqrt(6 /
// fan_in) (He); biases zero. Fans: dense inputs and units, conv kernel^2 times in and out
// channels, dwconv kernel^2 both. Tensor t draws from CounterRng(seed, 0, t,
// StreamId(RandomPurpose::kModelInit)) as InitModelParameters does, so "dense:H,relu,dense:C"
// starts at the MLP's bits. Errors: kInvalidArgument for an invalid spec or a wrong params
// size. Does not allocate.
Status InitSequentialParameters(const SequentialSpec& spec, std::uint64_t seed,
                                std::span<float> params);

// Forward and backward passes of a SequentialSpec. Samples are processed one at a time, so
// scratch does not grow with the batch. Convolutions gather the receptive fields of up to
// 16,384 floats' worth of output positions into scratch and multiply them by the filters in
// products of up to 256 positions: Eigen's blocked product where Eigen may allocate (its
// packing buffers live on the stack, or on the heap beyond 128 KB), and a row-by-row product
// that skips zero factors under EIGEN_NO_MALLOC (bare metal).
struct Sequential {
  // Floats of scratch one call needs (0 for an invalid spec, or one whose scratch would not fit
  // in this machine's address space): every layer's output for one sample, two gradient
  // buffers as large as the largest output before the last layer, each conv layer's gathered
  // receptive fields (output positions x kernel^2 x in channels, at most 16,384 floats or one
  // field), and the gradient of the largest product's fields (at most 256 of them).
  static std::size_t ScratchFloats(const SequentialSpec& spec);

  // Reads params (ParameterCount(spec) floats) and batch (float features, feature_dim =
  // spec.features(), labels < classes); writes gradient (same size as params) with the
  // gradient of the mean cross-entropy over the batch and returns that mean. Uses scratch (at
  // least ScratchFloats(spec) floats). Errors, with gradient untouched: kInvalidArgument for
  // an invalid spec or a size/shape mismatch, kOutOfRange for a label out of range.
  // Non-finite parameters give a non-finite loss, not an error. Does not allocate.
  static Result<float> LossAndGradient(const SequentialSpec& spec, std::span<const float> params,
                                       const DatasetView& batch, std::span<float> gradient,
                                       std::span<float> scratch);

  // Adds the losses, correct predictions (argmax of the logits == label, ties to the lowest
  // class) and samples of `data` to `sums`. Same errors as LossAndGradient, with sums
  // untouched. Does not allocate.
  static Status AddToEvaluation(const SequentialSpec& spec, std::span<const float> params,
                                const DatasetView& data, std::span<float> scratch,
                                EvaluationSums& sums);
};

}  // namespace edgesgd
