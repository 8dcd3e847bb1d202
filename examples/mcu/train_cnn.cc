// A small CNN trained on a Cortex-M4F with top_k (10%) + error feedback within 256 KiB of RAM:
// conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10 (1,898 parameters) on the 14x14
// Fashion-MNIST slice in flash (fashion_slice.h; this image's own 4,096 + 1,024 images, see
// CMakeLists.txt), through Model with a kSequential spec, in train_10k's round
// (compressed_round.h). Unlike train_10k, the worker owns top_k's scratch: at this dimension its
// fixed part (17.5 KB) exceeds the 7.6 KB model/gradient buffer that could be lent.
//
// Prints the plan per component, loss at intervals, held-out accuracy, flash, static RAM,
// stack peak and the time per training sample from platform::MonotonicNanos (on qemu the
// SysTick fallback, which follows the host's clock: emulated time, not a board's). Passes if
// the RAM (static + stack peak) is within 256 KiB, the loss fell by kRequiredLossFactor,
// held-out accuracy beat chance by kRequiredMargin, and the static RAM beyond the plan stays
// under kUnplannedBudgetBytes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/model/sequential.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/wire/frame_builder.h"
#include "compressed_round.h"
#include "fashion_slice.h"

namespace edgesgd::mcu {
namespace {

using platform::Log;
using platform::LogLevel;

constexpr char kNetworkText[] = "conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10";

constexpr LayerSpec Conv(std::uint32_t filters) {
  return {.kind = LayerKind::kConv, .units = filters, .kernel = 3, .stride = 1};
}
constexpr LayerSpec Relu() { return {.kind = LayerKind::kRelu}; }
constexpr LayerSpec MaxPool() { return {.kind = LayerKind::kMaxPool, .kernel = 2, .stride = 2}; }

// kNetworkText as a constant, so every buffer below is sized at compile time; Train checks
// that the parser gives the same spec, layout and scratch.
constexpr SequentialSpec MakeNetwork() {
  SequentialSpec spec{};
  spec.input = {.height = kImageSide, .width = kImageSide, .channels = 1};
  spec.classes = kImageClasses;
  constexpr LayerSpec kLayers[] = {Conv(8),   Relu(), MaxPool(), Conv(16), Relu(), MaxPool(),
                                   {.kind = LayerKind::kDense, .units = kImageClasses}};
  spec.layer_count = std::size(kLayers);
  for (std::size_t i = 0; i < std::size(kLayers); ++i) spec.layers[i] = kLayers[i];
  return spec;
}
constexpr SequentialSpec kNetwork = MakeNetwork();
constexpr ModelSpec kSpec{.kind = ModelKind::kSequential,
                          .features = kImageFeatures,
                          .classes = kImageClasses,
                          .network = kNetwork};
// Weights then bias per layer: conv 8x3x3x1, conv 16x3x3x8, dense 10x(2x2x16).
constexpr std::uint64_t kTensorSizes[] = {8 * 9, 8, 16 * 9 * 8, 16, kImageClasses * 64,
                                          kImageClasses};
constexpr TensorLayout kLayout = TensorLayout::FromSizes(kTensorSizes).value();
constexpr std::size_t kDimension = kLayout.dimension();
// Sequential::ScratchFloats: every layer's output (1152 + 1152 + 288 + 256 + 256 + 64 + 10),
// two gradient buffers of the largest output before the last layer (2 x 1152), each conv
// layer's gathered receptive fields (12 x 12 x 9 and 4 x 4 x 72) and the larger one's gradient.
constexpr std::size_t kScratchFloats = 3178 + 2 * 1152 + (1296 + 1152) + 1296;

constexpr TopKParams kTopK{.k_ratio = 0.1f};
constexpr CodecParams kCodec = kTopK;
constexpr auto kCodecOps = MakeCodecOps<TopKCodec>();
constexpr CodecRegistry kCodecs(kCodecOps);
constexpr FeedbackParams kFeedback{.kind = FeedbackKind::kEf,
                                   .detach = 0.0f,
                                   .learning_rate = 0.1f,
                                   .momentum = 0.0f,
                                   .weight_decay = 0.0f,
                                   .local_steps = 1};
constexpr std::uint32_t kRounds = 3000;
constexpr std::uint32_t kLogEvery = 500;
constexpr std::uint32_t kBatch = 4;
constexpr std::uint64_t kSeed = 7;
// Measured: loss 2.398 -> 0.471 (5.1x), held-out accuracy 77.1 % on 1,024 images (the runs are
// bit-reproducible; these margins absorb a toolchain changing the arithmetic, about 9 standard
// errors of the accuracy estimate).
constexpr float kRequiredLossFactor = 3.0f;
constexpr float kRequiredMargin = 0.55f;
constexpr std::size_t kRamTargetBytes = 256 * 1024;
// Static RAM that is not in the plan: the components' own objects, the platform's and newlib's
// globals. Above this, something holds memory the plan does not know about.
constexpr std::size_t kUnplannedBudgetBytes = 2048;

// The plan, from the components' own constexpr size functions.
constexpr auto kOwnedScratch = ErrorFeedbackWorker::CodecScratch::kOwned;
constexpr std::size_t kFeedbackBytes =
    ErrorFeedbackWorker::StateBytes(kLayout, kCodec, kFeedback, kOwnedScratch);
constexpr std::size_t kCodecScratchBytes = CodecScratchBytes(kCodec, kLayout);
constexpr std::size_t kModelScratchBytes = ArenaBytesFor<float>(kScratchFloats);
constexpr std::size_t kVectorBytes = ArenaBytesFor<float>(kDimension);
constexpr std::size_t kBuilderBytes = wire::FrameBuilderBytes(kCodec, kLayout);
constexpr std::size_t kBatchBytes = kBatch * (kImageFeatures * sizeof(float) + 1);
constexpr std::size_t kPlanBytes =
    kFeedbackBytes + kModelScratchBytes + kVectorBytes + kBuilderBytes + kBatchBytes;
static_assert(kFeedbackBytes > 0 && kBuilderBytes > 0);
constexpr TrainingTargets kTargets{.ram_bytes = kRamTargetBytes,
                                   .plan_bytes = kPlanBytes,
                                   .unplanned_budget_bytes = kUnplannedBudgetBytes,
                                   .loss_factor = kRequiredLossFactor,
                                   .accuracy_margin = kRequiredMargin};

alignas(kArenaAlignment) std::array<std::byte, kFeedbackBytes + kModelScratchBytes> g_arena;
// The synced model between rounds, the gradient within one.
alignas(kArenaAlignment) std::array<float, kDimension> g_vector;
alignas(kArenaAlignment) std::array<std::byte, kBuilderBytes> g_builder_storage;
std::array<float, kBatch * kImageFeatures> g_batch_features;
std::array<std::uint8_t, kBatch> g_batch_labels;
const ImageBuffers kBatchBuffers{g_batch_features, g_batch_labels};

ErrorFeedbackWorker g_worker;
Model g_model;

// The training loss is followed on the first training images (see ImageSlice::First).
constexpr std::size_t kLossImages = 128;
const ImageSlice kLossSlice = kTrainSlice.First(kLossImages);

constexpr CompressedRound kRound{.worker = g_worker,
                                 .model = g_model,
                                 .vector = g_vector,
                                 .codecs = kCodecs,
                                 .codec = kCodec,
                                 .layout = kLayout,
                                 .seed = kSeed,
                                 .batch = kBatch,
                                 .train = kTrainSlice,
                                 .buffers = kBatchBuffers,
                                 .builder_storage = g_builder_storage};

// The parser, the layout and the scratch size must agree with the constants the plan was
// computed from. Not inlined, so the parsed spec is off the stack while training runs.
[[gnu::noinline]] Status CheckSpec() {
  EDGESGD_TRY_ASSIGN(const SequentialSpec parsed,
                     ParseSequentialSpec(kNetworkText, kNetwork.input, kImageClasses));
  if (!(parsed == kNetwork)) return Status::Internal();
  EDGESGD_TRY_ASSIGN(const TensorLayout layout, ModelLayout(kSpec));
  if (!(layout == kLayout) || ModelScratchFloats(kSpec) != kScratchFloats) {
    return Status::Internal();
  }
  return Status::Ok();
}

Status Train(TrainingRecord& record) {
  EDGESGD_TRY(CheckSpec());
  Arena arena(g_arena);
  EDGESGD_TRY(g_worker.Init(arena, kCodecs, kLayout, kCodec, kFeedback, kOwnedScratch));
  EDGESGD_TRY(g_model.Init(kSpec, arena));
  arena.Seal();
  EDGESGD_TRY(g_model.InitParameters(kSeed, g_vector));
  return TrainRounds(kRound, kRounds, kLogEvery, kLossSlice, kTestSlice, record);
}

int Run() {
  Log(LogLevel::kInfo, "CNN %s on %zux%zux1: %zu parameters, top_k %.0f%% + EF, %u rounds of batch %u",
      kNetworkText, kImageSide, kImageSide, kDimension,
      static_cast<double>(kTopK.k_ratio * 100.0f), static_cast<unsigned>(kRounds),
      static_cast<unsigned>(kBatch));
  Log(LogLevel::kInfo,
      "plan: EF %zu B (2 x %zu B + top_k scratch %zu B), model/gradient %zu B, frame builder "
      "%zu B, model scratch %zu B, batch %zu B; total %zu B",
      kFeedbackBytes, kVectorBytes, kCodecScratchBytes, kVectorBytes, kBuilderBytes,
      kModelScratchBytes, kBatchBytes, kPlanBytes);
  TrainingRecord record;
  if (const Status status = Train(record); !status.ok()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: training failed: %s", status.reason());
    return 1;
  }
  return ReportTraining(kRound, record, kRounds, kTargets);
}

}  // namespace
}  // namespace edgesgd::mcu

int main() { return edgesgd::mcu::Run(); }
