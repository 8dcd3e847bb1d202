#pragma once

// Error feedback on the server's side of a two-way compressed run. When the workers' codec has
// no payload sums (top_k: every worker picks its own coordinates), the mean of their updates is
// dense, and broadcasting it would cost as much as the model. Instead the server compresses it
// again with the same codec and keeps what that compression dropped for the next round:
//
//   e_s += mean_i C(p_i);   b = C(e_s);   e_s -= b;   x -= b   (on the server and every worker)
//
// the server half of two-way error feedback (Dist-EF-SGD, Zheng et al. 2019; DoubleSqueeze,
// Tang et al. 2019). Every coordinate of every update still reaches the model, delayed at most
// until it is large enough to be sent, just as on the uplink.

#include <cstddef>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

class DownlinkFeedback {
 public:
  // Exact arena bytes Init takes: the residual (d floats) and the codec's scratch; 0 for bad
  // parameters or a codec a server cannot re-compress with (CodecTraits::downlink_recompress:
  // the encoding must depend on nothing but its input and the round's shared context).
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec) {
    if (layout.tensor_count() == 0 || !TraitsOf(codec).downlink_recompress ||
        !EncodedShape(codec, layout).ok()) {
      return 0;
    }
    return ArenaBytesFor<float>(layout.dimension()) + ArenaBytes(CodecScratchBytes(codec, layout));
  }

  // Takes the residual (zeroed) and the codec's scratch from `arena`; encodes and decodes with
  // the codec's operations in `codecs` (which must outlive it). Allocates from the arena only.
  // Errors: kInvalidArgument (empty layout, bad codec parameters, unsupported codec),
  // kFailedPrecondition (codec not registered, arena sealed), kResourceExhausted (arena too
  // small; nothing taken).
  Status Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
              const CodecParams& codec);

  // e_s += update (d floats); writes C(e_s) into `out` (each span at least the codec's shape);
  // e_s -= decode(C(e_s)), decoded exactly as the receivers will. Returns the payload's shape.
  // Does not allocate. Errors: kFailedPrecondition before Init; kInvalidArgument for a wrong
  // size; kResourceExhausted for a short span (nothing changes); the codec's error for a
  // non-finite e_s (training diverged), which then holds the sum.
  Result<PayloadShape> Compress(std::span<const float> update, const CodecContext& context,
                                const PayloadSpans& out);

  // What the downlink has not delivered yet (d floats), for checkpoints.
  std::span<const float> residual() const { return residual_; }

  // Replaces the residual with d floats stored as bytes at any alignment (a checkpoint's
  // copy of std::as_bytes(residual())). Errors: kFailedPrecondition before Init;
  // kInvalidArgument for a wrong size or a non-finite value (nothing changes then).
  Status RestoreResidual(std::span<const std::byte> stored);

 private:
  TensorLayout layout_;
  CodecParams codec_;
  const CodecOps* ops_ = nullptr;
  PayloadShape shape_;
  std::span<float> residual_;
  std::span<std::byte> scratch_;
  bool initialized_ = false;
};

}  // namespace edgesgd
