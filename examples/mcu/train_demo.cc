// On-device training demo for a Cortex-M4F (qemu mps2-an386 under run_mcu.sh): two workers
// train softmax regression on a compiled-in Fashion-MNIST slice (14x14 pixels, 10 classes,
// 1970 parameters) through the real protocol. Each worker is a protocol::WorkerSession running
// error feedback (core's ErrorFeedbackWorker) with top_k, whose gradients come from core's Model;
// its Update frames are encoded by the wire layer's FrameBuilder with the codec writing straight
// into the frame. The parameter server is a protocol::ServerSession in the same image: a
// loopback that copies every frame from the session that sent it to the one it is addressed to,
// as a radio or serial link driver would. Everything is static memory sized at compile time from
// the components' own ArenaBytes; nothing touches a heap.
//
// Prints the training loss and held-out accuracy as rounds go by, the bytes of every kind of
// frame, and the image's memory use. Prints "EDGESGD-MCU PASS" only if the training loss fell
// by at least kRequiredLossFactor and held-out accuracy beat chance (10%) by kRequiredMargin.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/model/softmax_regression.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "fashion_slice.h"
#include "memory_usage.h"
#include "softmax_constants.h"
#include "verdict.h"

namespace edgesgd::mcu {
namespace {

using platform::Log;
using platform::LogLevel;
using protocol::OutgoingFrame;
using protocol::PeerId;
using protocol::RunConfig;
using protocol::ServerOptions;
using protocol::ServerSession;
using protocol::TimeNs;
using protocol::WorkerSession;

constexpr ModelSpec kSpec = SoftmaxRegressionSpec(kImageFeatures, kImageClasses);
// As a constant, so every buffer below is sized at compile time; Run checks it against
// ModelLayout(kSpec).
constexpr TensorLayout kLayout = SoftmaxRegressionLayout(kSpec);

constexpr std::uint32_t kWorkers = 2;
constexpr std::uint32_t kRounds = 200;
constexpr std::uint32_t kBatch = 16;
constexpr std::uint32_t kLogEvery = 50;
// The training loss is followed on the first training images (see ImageSlice::First).
constexpr std::size_t kLossImages = 256;
// Pass criteria: the training loss at least this many times lower than at the start (ln 10 for
// the zero model), and held-out accuracy at least this far above chance.
constexpr float kRequiredLossFactor = 3.0f;
constexpr float kRequiredMargin = 0.5f;

constexpr TopKParams kTopK{.k_ratio = 0.05f};
// The one codec the image runs (server and workers alike).
constexpr auto kCodecOps = MakeCodecOps<TopKCodec>();
constexpr CodecRegistry kCodecs(kCodecOps);

constexpr RunConfig MakeConfig() {
  RunConfig config;
  config.layout = kLayout;
  config.codec = kTopK;
  config.feedback = FeedbackParams{.kind = FeedbackKind::kEf,
                                   .detach = 0.0f,
                                   .learning_rate = 0.02f,
                                   .momentum = 0.9f,
                                   .weight_decay = 0.0f,
                                   .local_steps = 1};
  config.batch = kBatch;
  config.rounds = kRounds;
  config.seed = 2024;
  return config;
}
constexpr RunConfig kConfig = MakeConfig();
constexpr ServerOptions kServerOptions{.workers = kWorkers, .quorum = kWorkers};

// Arena storage of each session, sized by the sessions themselves.
constexpr std::size_t kServerArenaBytes = ServerSession::ArenaBytes(kConfig, kServerOptions);
constexpr std::size_t kWorkerArenaBytes = WorkerSession::ArenaBytes(kConfig);
static_assert(kServerArenaBytes > 0 && kWorkerArenaBytes > 0, "the run configuration is invalid");
constexpr std::size_t kModelArenaBytes = ArenaBytesFor<float>(SoftmaxRegression::ScratchFloats(kSpec));

struct alignas(kArenaAlignment) WorkerArena {
  std::array<std::byte, kWorkerArenaBytes> bytes;
};
struct alignas(kArenaAlignment) ModelArena {
  std::array<std::byte, kModelArenaBytes> bytes;
};
alignas(kArenaAlignment) std::array<std::byte, kServerArenaBytes> g_server_arena;
std::array<WorkerArena, kWorkers> g_worker_arenas;
std::array<ModelArena, kWorkers + 1> g_model_arenas;  // one per worker, one for evaluation

// One batch of converted images, shared: gradients are computed one worker at a time, and the
// evaluation between rounds reuses it in chunks.
std::array<float, kBatch * kImageFeatures> g_batch_features;
std::array<std::uint8_t, kBatch> g_batch_labels;
const ImageBuffers kBatchBuffers{g_batch_features, g_batch_labels};

// What a worker's gradient callback needs: its model kernel and its shard of the training slice
// (an iid split: contiguous rows of a slice the dataset already shuffles).
struct WorkerContext {
  Model model;
  // The session keeps its arena until the first Welcome, so it lives here, not on the stack.
  std::optional<Arena> arena;
  std::uint32_t id = 0;
  std::size_t first_row = 0;
  std::size_t rows = 0;
};
std::array<WorkerContext, kWorkers> g_contexts;

Status ComputeGradient(void* user, std::span<const float> point, std::uint32_t round,
                       std::uint32_t local_step, std::span<float> gradient) {
  WorkerContext& context = *static_cast<WorkerContext*>(user);
  // The conventional private sampling stream (core/data/dataset.h): batch t is a function of t.
  CounterRng rng(kConfig.seed, round, local_step,
                 StreamId(RandomPurpose::kDataSampling, context.id));
  EDGESGD_TRY_ASSIGN(const DatasetView batch, SampleImages(kTrainSlice, context.first_row,
                                                           context.rows, kBatch, rng,
                                                           kBatchBuffers));
  EDGESGD_TRY_ASSIGN(const float loss, context.model.LossAndGradient(point, batch, gradient));
  return std::isfinite(loss) ? Status::Ok() : Status::DataLoss();
}

// The link between the sessions: frames in flight, each copied out of its sender (whose frames
// are valid only until its next call) into a fixed 8-byte aligned slot, delivered in order.
class Loopback {
 public:
  static constexpr std::size_t kMaxFrameBytes =
      protocol::BroadcastFrameBytes(kConfig) > protocol::UpdateFrameBytes(kConfig)
          ? protocol::BroadcastFrameBytes(kConfig)
          : protocol::UpdateFrameBytes(kConfig);
  // Enough for the worst burst: both Welcomes and both first broadcasts.
  static constexpr std::size_t kSlots = 2 * kWorkers + 1;

  struct Frame {
    PeerId from = 0;
    PeerId to = 0;
    std::span<const std::byte> bytes;
  };

  // Errors: kResourceExhausted when every slot is taken, kOutOfRange for an oversized frame.
  Status Push(PeerId from, const OutgoingFrame& frame) {
    if (count_ == kSlots) return Status::ResourceExhausted();
    if (frame.bytes.size() > kMaxFrameBytes) return Status::OutOfRange();
    const std::size_t index = (head_ + count_) % kSlots;
    Slot& slot = slots_[index];
    std::copy(frame.bytes.begin(), frame.bytes.end(), slot.bytes.begin());
    slot.from = from;
    slot.to = frame.to;
    slot.length = frame.bytes.size();
    ++count_;
    return Status::Ok();
  }

  // The oldest frame; valid until the next Push into its slot (after the next Pop).
  bool Pop(Frame& out) {
    if (count_ == 0) return false;
    const Slot& slot = slots_[head_];
    out = Frame{slot.from, slot.to, std::span<const std::byte>(slot.bytes).first(slot.length)};
    head_ = (head_ + 1) % kSlots;
    --count_;
    return true;
  }

  bool empty() const { return count_ == 0; }

 private:
  struct Slot {
    alignas(8) std::array<std::byte, kMaxFrameBytes> bytes;
    PeerId from;
    PeerId to;
    std::size_t length;
  };
  std::array<Slot, kSlots> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

ServerSession g_server;
std::array<WorkerSession, kWorkers> g_workers;
Loopback g_link;

// Sizes of the frames that crossed the link, by kind.
struct FrameStats {
  std::size_t update_bytes = 0;     // one Update (top_k payload)
  std::size_t broadcast_bytes = 0;  // the largest ModelBroadcast (dense model)
  std::uint64_t uplink_bytes = 0;
  std::uint64_t downlink_bytes = 0;
  std::uint32_t updates = 0;
};
FrameStats g_stats;

protocol::Session& SessionOf(PeerId peer) {
  if (peer == protocol::kServerPeer) return g_server;
  return g_workers[peer - 1];
}

// Moves everything `peer` wants to send onto the link.
Status Drain(PeerId peer) {
  protocol::Session& session = SessionOf(peer);
  OutgoingFrame frame;
  while (session.PollFrame(frame)) {
    if (peer == protocol::kServerPeer) {
      g_stats.downlink_bytes += frame.bytes.size();
      if (frame.bytes.size() > g_stats.broadcast_bytes) g_stats.broadcast_bytes = frame.bytes.size();
    } else {
      g_stats.uplink_bytes += frame.bytes.size();
      // Only an Update reports training work (control frames and re-sends report none).
      if (frame.work_samples > 0) {
        g_stats.update_bytes = frame.bytes.size();
        ++g_stats.updates;
      }
    }
    EDGESGD_TRY(g_link.Push(peer, frame));
  }
  return Status::Ok();
}

struct Progress {
  float first_loss = 0.0f;
  float last_loss = 0.0f;
  float last_accuracy = 0.0f;
};

Model g_evaluator;
const ImageSlice kLossSlice = kTrainSlice.First(kLossImages);

Status Report(std::uint32_t round, Progress& progress) {
  EDGESGD_TRY_ASSIGN(const Evaluation train, EvaluateImages(g_evaluator, g_server.model(),
                                                            kLossSlice, kBatchBuffers));
  EDGESGD_TRY_ASSIGN(const Evaluation test, EvaluateImages(g_evaluator, g_server.model(),
                                                           kTestSlice, kBatchBuffers));
  if (round == 0) progress.first_loss = train.loss;
  progress.last_loss = train.loss;
  progress.last_accuracy = test.accuracy;
  Log(LogLevel::kInfo, "round %3u  train loss %.4f  held-out accuracy %.3f  uplink %llu B",
      static_cast<unsigned>(round), static_cast<double>(train.loss),
      static_cast<double>(test.accuracy), static_cast<unsigned long long>(g_stats.uplink_bytes));
  return Status::Ok();
}

// Initialises the sessions and models from their static arenas.
Status SetUp() {
  EDGESGD_TRY_ASSIGN(const TensorLayout layout, ModelLayout(kSpec));
  if (!(layout == kLayout)) return Status::Internal();

  Arena evaluator_arena(g_model_arenas[kWorkers].bytes);
  EDGESGD_TRY(g_evaluator.Init(kSpec, evaluator_arena));
  // The zero model (softmax regression starts there: see InitModelParameters).
  std::array<float, kLayout.dimension()> initial_model;
  EDGESGD_TRY(g_evaluator.InitParameters(kConfig.seed, initial_model));

  Arena server_arena(g_server_arena);
  const Status server =
      g_server.Init(server_arena, kCodecs, kConfig, kServerOptions, initial_model);
  if (!server.ok()) {
    Log(LogLevel::kError, "server: %s", server.reason());
    return server;
  }
  const std::size_t shard = kTrainSlice.size() / kWorkers;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    WorkerContext& context = g_contexts[w];
    Arena model_arena(g_model_arenas[w].bytes);
    EDGESGD_TRY(context.model.Init(kSpec, model_arena));
    context.id = w + 1;
    context.first_row = w * shard;
    context.rows = shard;
    Arena& worker_arena = context.arena.emplace(g_worker_arenas[w].bytes);
    const protocol::WorkerOptions options{.device_id = w + 1,
                                          .gradient = &ComputeGradient,
                                          .codecs = &kCodecs,
                                          .user = &context};
    const Status worker = g_workers[w].Init(worker_arena, options);
    if (!worker.ok()) {
      Log(LogLevel::kError, "worker %u: %s", static_cast<unsigned>(w + 1), worker.reason());
      return worker;
    }
  }
  return Status::Ok();
}

// Runs the protocol to the end: delivers frames in order, runs timers when the link is idle,
// and reports progress whenever the server closes a round.
Status Train(Progress& progress) {
  // Virtual time: a microsecond per delivered frame. Deadlines and heartbeats (seconds) never
  // fire on a link that loses nothing, but they would if a session stopped answering.
  TimeNs now = 0;
  g_server.Start(now);
  EDGESGD_TRY(Drain(protocol::kServerPeer));
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    g_workers[w].Start(now);
    EDGESGD_TRY(Drain(w + 1));
  }
  EDGESGD_TRY(Report(0, progress));

  Loopback::Frame frame;
  while (!g_server.Finished() || !g_link.empty()) {
    if (!g_link.Pop(frame)) {
      const TimeNs wakeup = g_server.NextWakeup();
      if (wakeup == protocol::kNever) return Status::Internal();  // stalled: a bug
      now = wakeup > now ? wakeup : now;
      g_server.OnTimer(now);
      EDGESGD_TRY(Drain(protocol::kServerPeer));
      continue;
    }
    now += 1000;
    if (frame.to > kWorkers) return Status::Internal();
    SessionOf(frame.to).OnFrame(frame.from, frame.bytes, now);
    EDGESGD_TRY(Drain(frame.to));

    protocol::RoundEvent event;
    while (g_server.PollRoundEvent(event)) {
      const std::uint32_t done = event.round + 1;
      if (done % kLogEvery == 0 || done == kRounds) EDGESGD_TRY(Report(done, progress));
    }
    protocol::RejectEvent reject;
    while (g_server.PollRejectEvent(reject)) {
      Log(LogLevel::kError, "server rejected a frame from peer %u: %s",
          static_cast<unsigned>(reject.peer), protocol::RejectReasonName(reject.reason));
      return Status::DataLoss();
    }
  }
  return g_server.status();
}

int Run() {
  Log(LogLevel::kInfo,
      "softmax regression on %zu Fashion-MNIST images (%zux%zu), %zu held out; %u workers, "
      "top_k %.0f%% + error feedback, %u rounds of batch %u; loss on the first %zu images",
      kTrainSlice.size(), kImageSide, kImageSide, kTestSlice.size(),
      static_cast<unsigned>(kWorkers), static_cast<double>(kTopK.k_ratio * 100.0f),
      static_cast<unsigned>(kRounds), static_cast<unsigned>(kBatch), kLossSlice.size());
  if (const Status status = SetUp(); !status.ok()) {
    Log(LogLevel::kError, "set-up failed: %s", status.reason());
    return 1;
  }
  Progress progress;
  if (const Status status = Train(progress); !status.ok()) {
    Log(LogLevel::kError, "training failed: %s", status.reason());
    return 1;
  }

  const std::size_t dense_bytes = wire::MaxFrameBytes(protocol::ModelCodec(), kLayout);
  Log(LogLevel::kInfo,
      "frames: update %zu B (top_k of %zu parameters; dense would be %zu B, %.1fx more), "
      "model broadcast %zu B; %u updates, uplink %llu B, downlink %llu B",
      g_stats.update_bytes, kLayout.dimension(), dense_bytes,
      static_cast<double>(dense_bytes) / static_cast<double>(g_stats.update_bytes),
      g_stats.broadcast_bytes, static_cast<unsigned>(g_stats.updates),
      static_cast<unsigned long long>(g_stats.uplink_bytes),
      static_cast<unsigned long long>(g_stats.downlink_bytes));
  Log(LogLevel::kInfo, "arenas: server %zu B, worker %zu B each, link %zu B",
      kServerArenaBytes, kWorkerArenaBytes, sizeof(Loopback));
  platform::internal::LogMemoryUse();

  const float loss_factor = progress.first_loss / progress.last_loss;
  const float chance = 1.0f / static_cast<float>(kImageClasses);
  Log(LogLevel::kInfo,
      "train loss %.4f -> %.4f (%.2fx lower, need %.1fx); held-out accuracy %.3f (chance %.2f, "
      "need %.2f)",
      static_cast<double>(progress.first_loss), static_cast<double>(progress.last_loss),
      static_cast<double>(loss_factor), static_cast<double>(kRequiredLossFactor),
      static_cast<double>(progress.last_accuracy), static_cast<double>(chance),
      static_cast<double>(chance + kRequiredMargin));
  return Verdict(loss_factor >= kRequiredLossFactor &&
                     progress.last_accuracy >= chance + kRequiredMargin &&
                     g_server.counters().rounds_completed == kRounds &&
                     g_server.counters().updates_accepted == std::uint64_t{kWorkers} * kRounds,
                 "training did not reach the targets");
}

}  // namespace
}  // namespace edgesgd::mcu

int main() { return edgesgd::mcu::Run(); }
