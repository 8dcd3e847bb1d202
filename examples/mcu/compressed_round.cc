#include "compressed_round.h"

#include <algorithm>

#include "edgesgd/wire/frame_decoder.h"

namespace edgesgd::mcu {
namespace {

// x_{t+1} = x_t - C(p) into run.vector, with x_t the gradient point (c = 0, H = 1) and C(p) read
// back from the Update frame as a server would. Not inlined, and the decoded view is used in
// place rather than copied out of its Result: a frame view is 520 B, and the stack is part of
// the RAM budget.
[[gnu::noinline]] Status ApplyFrame(const CompressedRound& run, std::span<const std::byte> frame,
                                    const CodecContext& context) {
  const std::span<const float> synced = run.worker.GradientPoint();
  std::copy(synced.begin(), synced.end(), run.vector.begin());
  const Result<wire::FrameView> view = wire::DecodeFrame(frame);
  if (!view.ok()) return view.status();
  EDGESGD_TRY_ASSIGN(
      const CodecParams params,
      ParamsForPayload(run.codec, view->payload.codec, view->payload.layout, view->payload.header));
  return run.codecs.DecodeAdd(params, run.layout, context, view->payload.view, -1.0f, run.vector,
                              {});
}

}  // namespace

[[gnu::noinline]] Result<std::size_t> RunRound(const CompressedRound& run, std::uint32_t round,
                                               wire::FrameBuilder& builder) {
  EDGESGD_TRY(run.worker.BeginRound(run.vector));  // copies x: the vector is free from here
  CounterRng rng(run.seed, round, 0, StreamId(RandomPurpose::kDataSampling, 1));
  EDGESGD_TRY_ASSIGN(const DatasetView batch,
                     SampleImages(run.train, 0, run.train.size(), run.batch, rng, run.buffers));
  EDGESGD_TRY(run.model.LossAndGradient(run.worker.GradientPoint(), batch, run.vector).status());
  EDGESGD_TRY(run.worker.LocalStep(run.vector));

  const wire::FrameHeader header{.sender = 1, .round = round, .sequence = round};
  EDGESGD_TRY_ASSIGN(const PayloadSpans out,
                     builder.BeginPayloadFrame(
                         header, wire::PayloadMessage::Update({.worker = 1, .samples = run.batch}),
                         run.codec, run.layout));
  const CodecContext context{run.seed, round, 1};
  if (const Result<PayloadShape> shape =
          run.worker.Compress(context, out, std::as_writable_bytes(run.vector));
      !shape.ok()) {
    builder.AbandonPayloadFrame();
    return shape.status();
  }
  EDGESGD_TRY_ASSIGN(const std::span<const std::byte> frame, builder.FinishPayloadFrame());
  EDGESGD_TRY(ApplyFrame(run, frame, context));
  return frame.size();
}

}  // namespace edgesgd::mcu
