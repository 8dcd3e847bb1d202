#pragma once

// SCAFFOLD (Karimireddy et al., ICML 2020, the cheaper option II of its control-variate update):
// control variates that remove the drift of a device's local steps towards its own optimum on
// heterogeneous data. Device i keeps c_i, the server keeps c (the mean of every device's c_i),
// and a round of H local steps at learning rate eta from the synced model x goes
//
//   device:  y <- y - eta * (g_i(y) - c_i + c)                 ScaffoldDevice::Correct
//            after the steps, delta = x - y:
//            q_i = -c + delta / (H * eta)                       (the change of c_i)
//            send C(q_i) beside the model update; c_i += C(q_i) ScaffoldDevice::CompressChange
//   server:  c += (1 / N) * sum over the round's devices of C(q_i)
//
// where N is the number of devices in the federation (a MeanAggregator over the C(q_i) and
// AddScaledMean(count / N, c) is the server's step). Keeping c_i += C(q_i) rather than q_i keeps
// the server's c the mean of the devices' c_i whatever the codec drops, so compressing the
// change costs accuracy of the correction, never its consistency; only an update the server
// never receives leaves the device's c_i ahead of the server's mean.
//
// Memory (from the arena at Init, nothing afterwards): c_i and c, d floats each, and the
// codec's scratch; CompressChange borrows d more floats from the caller for q_i.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// Builds short of flash define EDGESGD_SCAFFOLD=0 (the bare-metal builds do): their frames then
// carry no control variates, their workers advertise no SCAFFOLD in their Join and refuse such a
// run, and the code for it stays out of the image.
#if defined(EDGESGD_SCAFFOLD) && !EDGESGD_SCAFFOLD
inline constexpr bool kScaffold = false;
#else
inline constexpr bool kScaffold = true;
#endif

class ScaffoldDevice {
 public:
  // Exact arena bytes Init takes; 0 for an empty layout or bad codec parameters.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec) {
    if (layout.tensor_count() == 0 || !EncodedShape(codec, layout).ok()) return 0;
    return 2 * ArenaBytesFor<float>(layout.dimension()) +
           ArenaBytes(CodecScratchBytes(codec, layout));
  }

  // Takes c_i and c (both zero, as the paper starts them) and the codec's scratch from `arena`;
  // compresses the changes with the codec's operations in `codecs`, which must outlive the
  // device. Allocates from the arena only. Errors: kInvalidArgument (empty layout, bad codec
  // parameters, a codec with a selector, whose state follows one stream of updates),
  // kFailedPrecondition (codec not registered, arena sealed), kResourceExhausted (arena too
  // small; nothing is taken then).
  Status Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
              const CodecParams& codec);

  // Takes the server's c for the coming round (d floats, e.g. from its broadcast). Does not
  // allocate. Errors: kFailedPrecondition before Init; kInvalidArgument for a wrong size or a
  // value that is not finite (nothing changes then).
  Status SetServerControl(std::span<const float> server_control);

  // gradient += c - c_i: the corrected gradient of one local step (d floats). Does not
  // allocate. Errors: kFailedPrecondition before Init; kInvalidArgument for a wrong size.
  Status Correct(std::span<float> gradient) const;

  // The change of c_i after a round of `steps` local steps at `learning_rate` that moved the
  // model by `delta` = x - y (d floats): q = -c + delta / (steps * learning_rate), formed in
  // `work` (d floats, any contents, e.g. a gradient buffer idle after the steps), compressed into
  // `out` (spans of at least payload_shape() elements) with `context`, and c_i += C(q), decoded
  // from the payload just written (the sum the server forms). Returns the payload's shape. Does
  // not allocate. Errors: kFailedPrecondition before Init; kInvalidArgument for wrong sizes, no
  // steps or a learning rate that is not positive and finite; kResourceExhausted for a span
  // shorter than the payload; the codec's error for a q that is not finite (training diverged).
  // c_i changes only on success.
  Result<PayloadShape> CompressChange(const CodecContext& context, std::span<const float> delta,
                                      std::uint32_t steps, float learning_rate,
                                      std::span<float> work, const PayloadSpans& out);

  // c_i and the c of the round (d floats each; empty before Init).
  std::span<const float> device_control() const { return device_control_; }
  std::span<const float> server_control() const { return server_control_; }
  // Element counts of every payload CompressChange writes.
  const PayloadShape& payload_shape() const { return shape_; }

 private:
  TensorLayout layout_;
  CodecParams codec_;
  const CodecOps* ops_ = nullptr;
  PayloadShape shape_;
  std::span<float> device_control_;
  std::span<float> server_control_;
  std::span<std::byte> scratch_;
};

}  // namespace edgesgd
