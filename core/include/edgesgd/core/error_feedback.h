#pragma once

// The error-feedback family (EF, DEF, DEF-A, SAEF; docs/algorithms.md) as one worker-side
// component. A worker keeps an error (residual) e, a heavy-ball momentum m and, when it takes
// several local steps per round, its drifting local model. Each round it compresses
// p = delta + e, where delta is what its local steps moved the model by (eta * m for H = 1),
// sends C(p) and keeps e = p - C(p). The server (or every worker after an all-reduce) applies
//
//   x_{t+1} = x_t - mean_i C(p_i)
//
// which MeanAggregator does: Add() every received payload with weight 1, then
// AddScaledMean(-1.0f, x). With H = 1 the whole round is exactly the DEF
// update of docs/algorithms.md §2.
//
// The detach coefficient c chooses where the gradient is taken: at x - c * e. c = 0 is classic
// EF (the synced model), c = 1 is SAEF (the virtual model x - e), DEF sits in between. DEF-A
// trains exactly like DEF and only reads the model out differently: see DeAveragedReadout.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/idle_memory.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

enum class FeedbackKind : std::uint8_t {
  kNone,  // send C(delta) and forget what C dropped; no residual is stored
  kEf,    // classic error feedback: gradient at the synced model (c forced to 0)
  kDef,   // detached error feedback: gradient at x - c * e with c = FeedbackParams::detach
  kSaef,  // step-ahead error feedback: gradient at the virtual model x - e (c forced to 1)
};

// Worker hyper-parameters. Defaults are the DEF authors' (ratio-64 block codec, ResNet scale).
struct FeedbackParams {
  FeedbackKind kind = FeedbackKind::kDef;
  // c in [0, 1]. Read only by kDef: kEf always uses 0 and kSaef always 1, so a configuration that
  // names the algorithm cannot silently run another one.
  float detach = 0.3f;
  float learning_rate = 0.05f;  // eta > 0, finite
  float momentum = 0.9f;        // beta in [0, 1); heavy ball without dampening
  float weight_decay = 0.0f;    // wd >= 0, finite; added to the gradient at the gradient point
  // H >= 1: at most this many LocalStep calls per round (a round normally takes exactly H).
  std::uint32_t local_steps = 1;
  // mu >= 0, finite: FedProx's proximal term (mu / 2) ||y - x||^2 between the round's local
  // model y and the synced model x (AddProximalGradient); 0 is plain local SGD.
  float prox_mu = 0.0f;

  friend constexpr bool operator==(const FeedbackParams&, const FeedbackParams&) = default;
};

// Checks the fields `params.kind` reads. Errors: kInvalidArgument. NaN fails every range check.
constexpr Status ValidateFeedbackParams(const FeedbackParams& params) {
  constexpr float kMaxFloat = std::numeric_limits<float>::max();
  switch (params.kind) {
    case FeedbackKind::kNone:
    case FeedbackKind::kEf:
    case FeedbackKind::kSaef:
      break;
    case FeedbackKind::kDef:
      if (!(params.detach >= 0.0f && params.detach <= 1.0f)) {
        return Status::InvalidArgument("the detach coefficient must be in [0, 1]");
      }
      break;
    default:
      return Status::InvalidArgument("unknown error feedback");
  }
  if (!(params.learning_rate > 0.0f && params.learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument("the learning rate must be positive and finite");
  }
  if (!(params.momentum >= 0.0f && params.momentum < 1.0f)) {
    return Status::InvalidArgument("the momentum must be in [0, 1)");
  }
  if (!(params.weight_decay >= 0.0f && params.weight_decay <= kMaxFloat)) {
    return Status::InvalidArgument("the weight decay must be non-negative and finite");
  }
  if (params.local_steps < 1) return Status::InvalidArgument("local steps must be at least 1");
  if (!(params.prox_mu >= 0.0f && params.prox_mu <= kMaxFloat)) {
    return Status::InvalidArgument("the proximal coefficient mu must be non-negative and finite");
  }
  return Status::Ok();
}

// The c a configuration actually uses (see FeedbackParams::detach); 0 for kNone, which has no
// error to detach from.
constexpr float EffectiveDetach(const FeedbackParams& params) {
  switch (params.kind) {
    case FeedbackKind::kDef:
      return params.detach;
    case FeedbackKind::kSaef:
      return 1.0f;
    case FeedbackKind::kNone:
    case FeedbackKind::kEf:
    default:
      return 0.0f;
  }
}

// One worker of EF / DEF / SAEF (or plain compressed local SGD with kNone). Per round:
//
//   BeginRound(x)                 local model := x, delta := 0
//   repeat H times:
//     g = gradient of the loss at GradientPoint()       (= local - c * e, computed by the caller)
//     LocalStep(g)                m = beta*m + (g + wd*point); local -= eta*m; delta += eta*m
//   Compress(context, out)        p = delta + e (clipped with SetClipNorm); out = C(p);
//                                 e = p - C(p)
//
// Memory (all from the arena at Init, nothing afterwards), in d-float buffers: the gradient
// point always; the momentum only when beta > 0 (with beta = 0, m = g is used as it comes);
// the residual unless kNone; a separate local model only when H > 1 and c > 0 (otherwise the
// local model is the gradient point); a separate delta when H > 1 or kNone (for H = 1, eta*m is
// added straight into the residual, which then holds p bit-exactly). So EF, DEF and SAEF with
// H = 1 cost 3d floats (2d with beta = 0) plus the codec's scratch, which a caller short of RAM
// can lend to each Compress instead (CodecScratch::kLent).
//
// Without a momentum buffer the step takes m = g where the buffered form computes 0 * m + g:
// the same float except, for g = -0, possibly the sign of a zero, which no residual, delta or
// payload can tell (they start at +0, and +0 + -0 = +0; with H > 1 a local-model coordinate
// that is exactly zero may carry the other sign), and except after a non-finite m, when the
// residual is non-finite too and Compress already reports the divergence.
//
// Stateful selection: for a codec with a selector (reg_top_k's posterior, d more floats) the
// worker also keeps the selector's state. Compress selects with it; after the round, the caller
// reports the aggregate (ObserveAggregate or ObserveModelChange) so the next selection can use
// it. For every other codec those calls do nothing.
class ErrorFeedbackWorker {
 public:
  // Where the codec's scratch for Compress (CodecScratchBytes(codec, layout) bytes) comes from.
  enum class CodecScratch : std::uint8_t {
    kOwned,  // taken from the arena at Init
    kLent,   // lent by the caller to every Compress: any buffer idle during that call, e.g. the
             // one the last LocalStep read its gradient from
  };

  // Exact arena bytes Init takes (Arena::used_bytes grows by this much), including the codec's
  // scratch when it is owned; 0 when a parameter is invalid.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec,
                                          const FeedbackParams& feedback,
                                          CodecScratch scratch = CodecScratch::kOwned) {
    if (layout.tensor_count() == 0 || !ValidateFeedbackParams(feedback).ok() ||
        !EncodedShape(codec, layout).ok()) {
      return 0;
    }
    const Buffers buffers = BuffersFor(feedback);
    const std::size_t vector_bytes = ArenaBytesFor<float>(layout.dimension());
    const std::size_t scratch_bytes =
        scratch == CodecScratch::kOwned ? ArenaBytes(CodecScratchBytes(codec, layout)) : 0;
    return vector_bytes * buffers.count() + SelectionStateBytes(layout, codec) + scratch_bytes;
  }

  // The part of StateBytes that is the codec's selection state across rounds (RegTop-k's
  // posterior), 0 for codecs without a selector.
  static constexpr std::size_t SelectionStateBytes(const TensorLayout& layout,
                                                   const CodecParams& codec) {
    const std::size_t floats = SelectorStateFloats(codec, layout);
    return floats == 0 ? 0 : ArenaBytesFor<float>(floats);
  }

  // Takes this worker's buffers from `arena` (zeroed: e = 0, m = 0) and remembers the
  // configuration; encodes with the codec's operations in `codecs` (which must outlive the
  // worker). Reads only the parameters. Allocates from the arena only, never the heap.
  // Errors: kInvalidArgument (empty layout, bad codec or feedback parameters),
  // kFailedPrecondition (codec not registered, arena sealed), kResourceExhausted (arena too
  // small; checked before anything is taken, so a failed Init leaves the arena as it was).
  Status Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
              const CodecParams& codec, const FeedbackParams& feedback,
              CodecScratch scratch = CodecScratch::kOwned);

  // Where a round's gradient point comes from. kCopy: the worker copies the synced model, which
  // the caller may change right after BeginRound. kBorrow: with one local step and no detaching
  // (H = 1, c = 0) the point is the synced model itself, read in place until Compress or the
  // next BeginRound, so the caller must not change it before then; this saves a pass over d
  // floats per round. Other configurations copy either way.
  enum class PointSource : std::uint8_t { kCopy, kBorrow };

  // Starts a round from the synced model `synced_model` (d floats, read only; see PointSource
  // for how long it is read): local model := x, delta := 0, gradient point := x - c*e.
  // Calling it before the previous round was compressed abandons that round: its progress is
  // folded into the residual (as if it had been compressed to nothing), so error feedback still
  // delivers it later; kNone simply drops it. Does not allocate.
  // Errors: kFailedPrecondition before Init, kInvalidArgument for a wrong size.
  Status BeginRound(std::span<const float> synced_model,
                    PointSource source = PointSource::kCopy);

  // The point at which the caller computes the next gradient: local - c * e (d floats). Valid
  // from BeginRound until the round's last LocalStep; for H = 1 it is not advanced by the step.
  std::span<const float> GradientPoint() const { return gradient_point_; }

  // One local heavy-ball step with `gradient` (d floats, the loss gradient at GradientPoint(),
  // without weight decay): g = gradient + wd * point; m = beta * m + g; local -= eta * m;
  // delta += eta * m; then advances the gradient point. Does not allocate.
  // Errors: kInvalidArgument for a wrong size; kFailedPrecondition outside a round or after H
  // steps in this round.
  Status LocalStep(std::span<const float> gradient);

  // Whether a round's delta can accumulate straight in the payload it is sent as: no residual
  // (kNone) and a codec whose payload values are its input unchanged (identity).
  bool CanAccumulateInPayload() const;

  // Accumulates the open round's delta in `values` (d floats: the values of the payload about to
  // be sent, e.g. reserved inside the Update frame) instead of the worker's own buffer, so that
  // Compress into a payload whose values are `values` copies nothing. Call after BeginRound and
  // before the round's first LocalStep; `values` must stay valid until Compress, and the next
  // BeginRound returns to the worker's own buffer. Does not allocate. Errors:
  // kFailedPrecondition when !CanAccumulateInPayload(), outside a round or after a step;
  // kInvalidArgument for a wrong size.
  Status AccumulateInPayload(std::span<float> values);

  // FedProx (Li et al. 2020): adds mu * (y - x) = -mu * delta, the gradient of the proximal term
  // (mu / 2) ||y - x||^2 at the round's local model y, to `gradient` (d floats, the loss gradient
  // the next LocalStep will take), mu = FeedbackParams::prox_mu. Nothing changes for mu = 0 or
  // before the round's first step (y = x then). Does not allocate. Errors: as LocalStep.
  Status AddProximalGradient(std::span<float> gradient) const;

  // Compresses p = delta + e into `out` (each span at least payload_shape() long) and keeps
  // e = p - C(p), computed by decoding the payload just written into e with weight -1 (the same
  // decode the receivers do, so sender and receivers agree on C(p) bit for bit). kNone sends
  // C(delta) and keeps no residual. Returns the payload's shape. Does not allocate.
  // Errors: kFailedPrecondition outside a round (before BeginRound or after this round's
  // Compress); kResourceExhausted when an output span is too small (nothing changes, retry
  // with larger spans); the codec's error when p is not finite (training diverged: qsgd's
  // Encode says kInvalidArgument, the decoders kDataLoss) — then e holds p.
  // With CodecScratch::kLent, `lent_scratch` (at least CodecScratchBytes(codec, layout) bytes,
  // aligned to kArenaAlignment, overlapping neither `out` nor this worker's buffers) is the
  // codec's scratch for this call only; its contents need not be anything. A shorter one is
  // kResourceExhausted, a misaligned one kInvalidArgument, both with nothing changed.
  // Otherwise `lent_scratch` is unused.
  Result<PayloadShape> Compress(const CodecContext& context, const PayloadSpans& out,
                                std::span<std::byte> lent_scratch = {});

  // Differential privacy: from the next Compress on, p (delta for kNone) is scaled down to an
  // L2 norm of at most `bound` before it is encoded (ClipToNorm), so with a codec that keeps the
  // norm bound (KeepsNormBound) no payload is longer than `bound`. What clipping removes is
  // dropped, not kept in the residual: the residual holds only p - C(p) of the clipped p, so it
  // stays bounded too. 0 turns clipping off (the default). Does not allocate.
  void SetClipNorm(float bound) { clip_norm_ = bound; }
  float clip_norm() const { return clip_norm_; }
  // The L2 norm of the last compressed p before clipping (0 before the first clipped Compress):
  // adaptive clipping counts the updates it did not have to shorten.
  float norm_before_clipping() const { return norm_before_clipping_; }

  // Reports the aggregate of the last compressed round to a stateful selector (reg_top_k's):
  // `mean_update` is ghat = mean_i C(p_i) (d floats) over `contributors` workers including this
  // one; 0 contributors means no aggregate was formed. Codecs without selection state ignore
  // it (kOk). Does not allocate. Errors (reg_top_k only): kFailedPrecondition when nothing was
  // compressed since the last report, kInvalidArgument for a wrong size; nothing changes then.
  Status ObserveAggregate(std::span<const float> mean_update, std::uint32_t contributors);

  // As ObserveAggregate with ghat = model_before - model_after, for a worker that learns the
  // aggregate from the model the server broadcasts (x_{t+1} = x_t - ghat).
  Status ObserveModelChange(std::span<const float> model_before, std::span<const float> model_after,
                            std::uint32_t contributors);

  // Tells a stateful selector that the last round's aggregate cannot be known (the worker
  // missed the round): reg_top_k selects as Top-k next time. Does not allocate.
  void ForgetAggregate();

  // The selector's state (RegTop-k's posterior Delta, d floats) while no aggregate is
  // outstanding; empty otherwise and for codecs without a selector.
  std::span<const float> selector_state() const {
    return selector_.awaiting_aggregate ? std::span<const float>() : selector_.values;
  }

  // Compresses the following rounds with `params` instead of the Init parameters: a codec's
  // per-round choice (CodecRegistry::RoundParams, e.g. a quantization schedule's level count).
  // Same codec, and its payload and scratch no larger than the Init parameters', which sized
  // the buffers; updates payload_shape(). Does not allocate. Errors: kFailedPrecondition before
  // Init; kInvalidArgument for another codec or a larger payload (nothing changes).
  Status SetRoundParams(const CodecParams& params);

  // Once a round's update is compressed, the buffers the next BeginRound rewrites before they
  // are read (the gradient point, a separate local model and delta, the owned codec scratch);
  // none before the first Compress or while a round is open. Does not allocate.
  IdleMemory IdleBuffers() const;

  // The open round's delta x - y (d floats) where it is kept apart from the residual (H > 1 or
  // kNone): after the round's first step and until Compress folds it; empty otherwise. SCAFFOLD
  // reads it to form the change of its control variate.
  std::span<const float> round_delta() const {
    const bool open = phase_ == Phase::kInRound && steps_ > 0;
    return open && buffers_.separate_delta ? std::span<const float>(delta_)
                                           : std::span<const float>();
  }
  // The residual e (d floats); empty for kNone, whose residual is identically zero.
  std::span<const float> residual() const { return error_; }
  // The momentum m (d floats); empty when beta = 0, whose m is each step's g.
  std::span<const float> momentum() const { return momentum_; }
  // Element counts of every payload Compress writes.
  const PayloadShape& payload_shape() const { return shape_; }
  // LocalStep calls so far in the current round.
  std::uint32_t steps_taken() const { return steps_; }
  // The c this worker uses (EffectiveDetach of its parameters).
  float detach() const { return detach_; }
  const FeedbackParams& params() const { return feedback_; }
  // The codec parameters the next Compress uses (the Init ones, or SetRoundParams').
  const CodecParams& codec() const { return codec_; }
  const TensorLayout& layout() const { return layout_; }

 private:
  // Which d-float buffers a configuration needs besides the gradient point.
  struct Buffers {
    bool momentum = false;        // heavy ball (beta > 0)
    bool separate_local = false;  // local model differs from the gradient point (H > 1, c > 0)
    bool error = false;           // a residual is kept (not kNone)
    bool separate_delta = false;  // delta cannot accumulate into the residual (H > 1 or kNone)
    constexpr std::size_t count() const {
      return 1u + (momentum ? 1u : 0u) + (separate_local ? 1u : 0u) + (error ? 1u : 0u) +
             (separate_delta ? 1u : 0u);
    }
  };
  static constexpr Buffers BuffersFor(const FeedbackParams& feedback) {
    Buffers buffers;
    buffers.momentum = feedback.momentum > 0.0f;
    buffers.separate_local = feedback.local_steps > 1 && EffectiveDetach(feedback) > 0.0f;
    buffers.error = feedback.kind != FeedbackKind::kNone;
    buffers.separate_delta = feedback.local_steps > 1 || !buffers.error;
    return buffers;
  }

  enum class Phase : std::uint8_t { kUninitialized, kIdle, kInRound, kSent };

  // Adds a separate delta into the residual and clears it, so p lives in the residual.
  void FoldDeltaIntoResidual();
  // C(input) into `out` with `scratch`, through the selection state when the codec has one.
  Status EncodeWithSelection(const CodecContext& context, std::span<const float> input,
                             const PayloadSpans& out, std::span<std::byte> scratch);
  // A separate delta is not zeroed when a round begins: until the round's first step it counts
  // as zero whatever its storage holds, and that step writes it without reading it.
  bool delta_is_fresh() const { return buffers_.separate_delta && steps_ == 0; }
  // LocalStep's arithmetic, with or without the momentum buffer, into a fresh delta or not.
  template <bool kMomentum, bool kFreshDelta>
  void Step(std::span<const float> gradient);

  TensorLayout layout_;
  CodecParams codec_;
  CodecParams init_codec_;  // the parameters the buffers were sized for
  const CodecOps* ops_ = nullptr;
  FeedbackParams feedback_;
  PayloadShape shape_;
  PayloadShape init_shape_;
  Buffers buffers_;
  float detach_ = 0.0f;
  std::span<float> point_;  // local - c * e
  std::span<const float> gradient_point_;  // point_, or the synced model when borrowed
  std::span<float> local_;  // aliases point_ unless buffers_.separate_local; static if H = 1
  std::span<float> momentum_;
  std::span<float> error_;  // empty for kNone
  // Where the round's delta accumulates: own_delta_, or the payload AccumulateInPayload lent.
  std::span<float> delta_;
  std::span<float> own_delta_;  // aliases error_ unless buffers_.separate_delta
  // The codec's scratch when owned (empty when lent), and what each Compress must be lent.
  std::span<std::byte> scratch_;
  SelectorState selector_;  // empty for codecs without a selector
  std::size_t lent_scratch_bytes_ = 0;
  CodecScratch scratch_source_ = CodecScratch::kOwned;
  std::uint32_t steps_ = 0;
  float clip_norm_ = 0.0f;  // 0: no clipping
  float norm_before_clipping_ = 0.0f;
  Phase phase_ = Phase::kUninitialized;
};

// DEF-A read-out: out = x - mean_i e_i over the residuals of all workers (each d floats), the
// de-averaged model that the SGD-IA view says tracks plain SGD. Training is unaffected; call it
// only when the model is read (evaluation, export). The mean is summed in worker order, then
// divided by n. `out` may be `synced_model` itself. Does not allocate.
// Errors: kInvalidArgument when there are no residuals or any size differs from x's.
Status DeAveragedReadout(std::span<const float> synced_model,
                         std::span<const std::span<const float>> residuals, std::span<float> out);

// The same read-out from a mean the caller already formed (e.g. with MeanAggregator::AddDense
// on residuals gathered from the workers): out = x - mean_residual. `out` may be
// `synced_model`. Does not allocate. Errors: kInvalidArgument for size mismatches.
Status DeAveragedReadoutFromMean(std::span<const float> synced_model,
                                 std::span<const float> mean_residual, std::span<float> out);

}  // namespace edgesgd
