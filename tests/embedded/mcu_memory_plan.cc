// The memory plan of edgesgd on a Cortex-M4F, computed on the target (32-bit size_t, the
// target's struct layouts) from the components' own constexpr size functions, and printed as
// markdown for tests/embedded/memory_report.py:
//   1. the arena bytes of every component for a 10,000-coordinate model, per codec;
//   2. the largest model dimension d whose worker fits 256 KiB of RAM, per codec: a protocol
//      WorkerSession (its arena plus a receive buffer for the largest broadcast), and a lean
//      device that trains alone with a lean ErrorFeedbackWorker (no momentum, the codec's
//      scratch lent from the gradient buffer), one d-float buffer and an Update frame builder
//      (the pattern of examples/mcu/train_10k.cc); for the lean device also within 128 KiB;
//   3. compressed gossip peers on a ring (degree 2) per codec, CHOCO (three public copies) and
//      BEER (six): arena and receive buffer at d = 10,000 and the largest d within 256 KiB.
// It also checks the plan against reality: for every codec, ErrorFeedbackWorker (with and
// without momentum and owned scratch), MeanAggregator and (for the codecs CHOCO takes) a CHOCO
// and a BEER GossipPeerSession Init on the target must take exactly their planned bytes from an
// arena.
// Prints "EDGESGD-MCU PASS" only if those checks hold.

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/majority_vote.h"
#include "edgesgd/core/optimizer.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/wire_format.h"
#include "format.h"
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

constexpr std::size_t kTableDimension = 10000;
constexpr std::size_t kRamBudgetBytes = 256 * 1024;
// The budget of the "10,000 parameters in 128 KiB" target, for the lean device.
constexpr std::size_t kSmallRamBudgetBytes = 128 * 1024;
constexpr std::uint32_t kServerWorkers = 8;

struct NamedCodec {
  const char* name;
  CodecParams params;
};

// Every codec of this build (EDGESGD_CODECS) with its default parameters (top_k and rand_k keep
// 1 %, random_block 1/64, qsgd 8 bits), from the registry: a new codec joins the report by being
// registered.
constexpr std::array<NamedCodec, kBuiltCodecCount> kCodecs = [] {
  std::array<NamedCodec, kBuiltCodecCount> codecs{};
  std::size_t next = 0;
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    codecs[next++] = {Codec::kName.data(), typename Codec::Params{}};
  });
  return codecs;
}();

// Classic EF with momentum, one local step (the demos' worker algorithm).
constexpr FeedbackParams kFeedback{.kind = FeedbackKind::kEf,
                                   .detach = 0.0f,
                                   .learning_rate = 0.05f,
                                   .momentum = 0.9f,
                                   .weight_decay = 0.0f,
                                   .local_steps = 1};

// The lean device's worker: classic EF without momentum, so no momentum buffer, and the codec's
// scratch lent to Compress by the caller.
constexpr FeedbackParams kLeanFeedback{.kind = FeedbackKind::kEf,
                                       .detach = 0.0f,
                                       .learning_rate = 0.1f,
                                       .momentum = 0.0f,
                                       .weight_decay = 0.0f,
                                       .local_steps = 1};
constexpr auto kLentScratch = ErrorFeedbackWorker::CodecScratch::kLent;

constexpr TensorLayout Layout(std::size_t d) { return TensorLayout::Single(d).value(); }

constexpr protocol::RunConfig Config(std::size_t d, const CodecParams& codec) {
  protocol::RunConfig config;
  config.layout = Layout(d);
  config.codec = codec;
  config.feedback = kFeedback;
  return config;
}

// A protocol worker: its arena plus the receive buffer of the largest frame it is sent.
constexpr std::size_t WorkerDeviceBytes(std::size_t d, const CodecParams& codec) {
  const protocol::RunConfig config = Config(d, codec);
  const std::size_t arena = protocol::WorkerSession::ArenaBytes(config);
  const std::size_t receive = protocol::BroadcastFrameBytes(config);
  return arena == 0 || receive == 0 ? 0 : arena + receive;
}

// A device training alone: lean error feedback, one d-float model/gradient buffer, which also
// lends the codec's scratch (so at small d it is as large as the scratch), the frame builder.
constexpr std::size_t LeanDeviceBytes(std::size_t d, const CodecParams& codec) {
  const std::size_t feedback =
      ErrorFeedbackWorker::StateBytes(Layout(d), codec, kLeanFeedback, kLentScratch);
  const std::size_t builder = wire::FrameBuilderBytes(codec, Layout(d));
  const std::size_t buffer =
      std::max(ArenaBytesFor<float>(d), ArenaBytes(CodecScratchBytes(codec, Layout(d))));
  return feedback == 0 || builder == 0 ? 0 : feedback + buffer + builder;
}

// A CHOCO or BEER peer sending `codec`'s deltas, without its mixing row.
constexpr protocol::GossipConfig CompressedGossipShape(protocol::GossipAlgorithm algorithm,
                                                       std::size_t d, const CodecParams& codec) {
  protocol::GossipConfig config;
  config.algorithm = algorithm;
  config.layout = Layout(d);
  config.codec = codec;
  return config;
}

// The same as peer 1 of a ring of 8 (degree 2).
protocol::GossipConfig RingPeerConfig(protocol::GossipAlgorithm algorithm, std::size_t d,
                                      const CodecParams& codec) {
  protocol::GossipConfig config = CompressedGossipShape(algorithm, d, codec);
  config.mixing = protocol::MakeMixingRow({protocol::TopologyKind::kRing, 8},
                                          protocol::MixingRule::kMetropolisHastings, 1)
                      .value();
  config.consensus_step = protocol::DefaultConsensusStep(codec).value();
  return config;
}

// Its arena plus the receive buffer of the largest frame it accepts.
template <protocol::GossipAlgorithm kAlgorithm>
std::size_t RingPeerBytes(std::size_t d, const CodecParams& codec) {
  const protocol::GossipConfig config = RingPeerConfig(kAlgorithm, d, codec);
  const std::size_t arena = protocol::GossipPeerSession::ArenaBytes(config);
  const std::size_t receive = protocol::GossipPeerSession::MaxFrameBytes(config);
  return arena == 0 || receive == 0 ? 0 : arena + receive;
}

using PlanFunction = std::size_t (*)(std::size_t, const CodecParams&);

// The largest d with 0 < plan(d) <= budget (plans grow with d), by bisection.
std::size_t LargestDimension(PlanFunction plan, const CodecParams& codec, std::size_t budget) {
  std::size_t low = 0;  // fits (0: nothing does)
  std::size_t high = 1024;
  while (plan(high, codec) != 0 && plan(high, codec) <= budget) {
    low = high;
    high *= 2;
  }
  while (high - low > 1) {
    const std::size_t middle = low + (high - low) / 2;
    const std::size_t bytes = plan(middle, codec);
    if (bytes != 0 && bytes <= budget) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return low;
}

// Raw output lines (the report reads them verbatim), formatted without a heap.
void Line(const char* format, ...) __attribute__((format(printf, 1, 2)));
void Line(const char* format, ...) {
  std::array<char, 256> text;
  std::va_list args;
  va_start(args, format);
  std::size_t length = platform::internal::FormatV(text, format, args);
  va_end(args);
  if (length + 1 >= text.size()) length = text.size() - 2;
  text[length] = '\n';
  platform::internal::SemihostingWrite(platform::internal::Stream::kStdout,
                                       std::string_view(text.data(), length + 1));
}

void BlankLine() {
  platform::internal::SemihostingWrite(platform::internal::Stream::kStdout, "\n");
}

void Row(const char* component, std::size_t (*bytes)(const CodecParams&)) {
  std::array<char, 256> text;
  std::size_t at = platform::internal::Format(text, "| %s |", component);
  for (const NamedCodec& codec : kCodecs) {
    at += platform::internal::Format(std::span(text).subspan(at), " %zu |", bytes(codec.params));
  }
  Line("%.*s", static_cast<int>(at), text.data());
}

protocol::GossipConfig GossipConfigOf(const TensorLayout& layout) {
  protocol::GossipConfig config;
  config.layout = layout;
  return config;
}

void PrintComponentTable() {
  const TensorLayout layout = Layout(kTableDimension);
  Line("### Arena plan per component, d = %zu (one tensor), bytes", kTableDimension);
  BlankLine();
  std::array<char, 256> header;
  std::size_t at = platform::internal::Format(header, "| component |");
  for (const NamedCodec& codec : kCodecs) {
    at += platform::internal::Format(std::span(header).subspan(at), " %s |", codec.name);
  }
  Line("%.*s", static_cast<int>(at), header.data());
  at = platform::internal::Format(header, "|---|");
  for (std::size_t i = 0; i < kCodecs.size(); ++i) {
    at += platform::internal::Format(std::span(header).subspan(at), "---:|");
  }
  Line("%.*s", static_cast<int>(at), header.data());
  static constexpr auto kLayout = Layout(kTableDimension);
  Row("payload (`MaxEncodedBytes`)", [](const CodecParams& c) { return MaxEncodedBytes(c, kLayout); });
  Row("Update frame (`wire::MaxFrameBytes`)",
      [](const CodecParams& c) { return wire::MaxFrameBytes(c, kLayout); });
  Row("frame builder (`wire::FrameBuilderBytes`)",
      [](const CodecParams& c) { return wire::FrameBuilderBytes(c, kLayout); });
  Row("codec scratch (`CodecScratchBytes`)",
      [](const CodecParams& c) { return CodecScratchBytes(c, kLayout); });
  Row("`ErrorFeedbackWorker::StateBytes` (EF, H = 1)",
      [](const CodecParams& c) { return ErrorFeedbackWorker::StateBytes(kLayout, c, kFeedback); });
  Row("`ErrorFeedbackWorker::StateBytes` (EF, H = 1, no momentum, scratch lent)",
      [](const CodecParams& c) {
        return ErrorFeedbackWorker::StateBytes(kLayout, c, kLeanFeedback, kLentScratch);
      });
  Row("`MeanAggregator::StateBytes`",
      [](const CodecParams& c) { return MeanAggregator::StateBytes(kLayout, c); });
  Row("`WorkerSession::ArenaBytes` (EF, model downlink)",
      [](const CodecParams& c) {
        return protocol::WorkerSession::ArenaBytes(Config(kTableDimension, c));
      });
  Row("`ServerSession::ArenaBytes` (8 workers, mean)", [](const CodecParams& c) {
    return protocol::ServerSession::ArenaBytes(Config(kTableDimension, c),
                                               {.workers = kServerWorkers});
  });
  BlankLine();
  Line("Codec-independent, same d: `Optimizer::StateBytes` (momentum) %zu, "
       "`MajorityVote::StateBytes` (%u voters) %zu, `GossipPeerSession::ArenaBytes` %zu, "
       "`WorkerSession::InitArenaBytes` %zu.",
       Optimizer::StateBytes(kTableDimension, {OptimizerKind::kMomentum, 0.05f, 0.9f, 0.0f}),
       static_cast<unsigned>(kServerWorkers), MajorityVote::StateBytes(layout, kServerWorkers),
       protocol::GossipPeerSession::ArenaBytes(GossipConfigOf(layout)),
       protocol::WorkerSession::InitArenaBytes());
  BlankLine();
}

void PrintLargestDimensions() {
  Line("### Largest model dimension d within %zu KiB of RAM", kRamBudgetBytes / 1024);
  BlankLine();
  Line("| codec | protocol worker (`WorkerSession` arena + receive buffer) | bytes at that d | "
       "lean device (EF state without momentum + 1 vector lending the scratch + frame builder) "
       "| bytes at that d | lean device within %zu KiB |", kSmallRamBudgetBytes / 1024);
  Line("|---|---:|---:|---:|---:|---:|");
  for (const NamedCodec& codec : kCodecs) {
    const std::size_t worker = LargestDimension(&WorkerDeviceBytes, codec.params, kRamBudgetBytes);
    const std::size_t lean = LargestDimension(&LeanDeviceBytes, codec.params, kRamBudgetBytes);
    const std::size_t lean_small =
        LargestDimension(&LeanDeviceBytes, codec.params, kSmallRamBudgetBytes);
    Line("| %s | %zu | %zu | %zu | %zu | %zu |", codec.name, worker,
         WorkerDeviceBytes(worker, codec.params), lean, LeanDeviceBytes(lean, codec.params),
         lean_small);
  }
  BlankLine();
  Line("Arena and frame buffers only: the model's scratch, the training data, the stack and the "
       "image's own globals come on top.");
  BlankLine();
}

constexpr std::array kCompressedGossip{protocol::GossipAlgorithm::kChoco,
                                      protocol::GossipAlgorithm::kBeer};

void PrintCompressedGossipPeers() {
  Line("### Compressed gossip peer on a ring (degree 2): CHOCO (3 public copies), BEER (6)");
  BlankLine();
  Line("| codec | CHOCO: arena + receive buffer at d = %zu | largest d within %zu KiB | BEER: "
       "arena + receive buffer at d = %zu | largest d within %zu KiB |",
       kTableDimension, kRamBudgetBytes / 1024, kTableDimension, kRamBudgetBytes / 1024);
  Line("|---|---:|---:|---:|---:|");
  constexpr PlanFunction kChoco = &RingPeerBytes<protocol::GossipAlgorithm::kChoco>;
  constexpr PlanFunction kBeer = &RingPeerBytes<protocol::GossipAlgorithm::kBeer>;
  for (const NamedCodec& codec : kCodecs) {
    if (!protocol::CheckChocoCodec(codec.params).ok()) {
      Line("| %s | refused | | refused | |", codec.name);
      continue;
    }
    Line("| %s | %zu | %zu | %zu | %zu |", codec.name, kChoco(kTableDimension, codec.params),
         LargestDimension(kChoco, codec.params, kRamBudgetBytes),
         kBeer(kTableDimension, codec.params),
         LargestDimension(kBeer, codec.params, kRamBudgetBytes));
  }
  BlankLine();
  Line("A peer's arena holds per sent vector (CHOCO: the model; BEER: the model and the gradient "
       "tracker) the vector, its consensus accumulator, its public copies, two frame builders of "
       "the codec's deltas and a dense one for the copy it sends when a neighbour asks; then the "
       "gradient (BEER: and the previous one) and the codec's scratch. The receive buffer takes "
       "a dense copy.");
  BlankLine();
}

// The plan against the target's reality: Init takes exactly StateBytes, from an arena at least
// as large as the largest plan. The gossip peers' sizes are known only at run time (their
// algorithms' facts live with the algorithms), so the arena has a fixed size that main checks
// first (a real board checks its own configuration).
std::size_t LargestPlanBytes() {
  const TensorLayout layout = Layout(kTableDimension);
  std::size_t largest = 0;
  for (const NamedCodec& codec : kCodecs) {
    for (const std::size_t bytes :
         {ErrorFeedbackWorker::StateBytes(layout, codec.params, kFeedback,
                                          ErrorFeedbackWorker::CodecScratch::kOwned),
          ErrorFeedbackWorker::StateBytes(layout, codec.params, kLeanFeedback, kLentScratch),
          MeanAggregator::StateBytes(layout, codec.params)}) {
      largest = bytes > largest ? bytes : largest;
    }
  }
  for (const NamedCodec& codec : kCodecs) {
    for (const protocol::GossipAlgorithm algorithm : kCompressedGossip) {
      // The plan depends on the mixing row only through the degree.
      protocol::GossipConfig peer = CompressedGossipShape(algorithm, kTableDimension, codec.params);
      peer.mixing.degree = 2;
      const std::size_t bytes = protocol::GossipPeerSession::ArenaBytes(peer);
      largest = bytes > largest ? bytes : largest;
    }
  }
  return largest;
}
constexpr std::size_t kArenaStorageBytes = std::size_t{1} << 20;
alignas(kArenaAlignment) std::array<std::byte, kArenaStorageBytes> g_arena_storage;

int CheckPlanIsExact() {
  int failures = 0;
  const TensorLayout layout = Layout(kTableDimension);
  for (const NamedCodec& codec : kCodecs) {
    for (const auto& [feedback, scratch] :
         {std::pair{kFeedback, ErrorFeedbackWorker::CodecScratch::kOwned},
          std::pair{kLeanFeedback, kLentScratch}}) {
      Arena arena(g_arena_storage);
      ErrorFeedbackWorker worker;
      const std::size_t plan =
          ErrorFeedbackWorker::StateBytes(layout, codec.params, feedback, scratch);
      if (!worker.Init(arena, AllCodecs(), layout, codec.params, feedback, scratch).ok() ||
          arena.used_bytes() != plan) {
        Log(LogLevel::kError, "FAIL %s: ErrorFeedbackWorker (momentum %.1f) took %zu B, plan %zu B",
            codec.name, static_cast<double>(feedback.momentum), arena.used_bytes(), plan);
        ++failures;
      }
    }
    {
      Arena arena(g_arena_storage);
      MeanAggregator aggregator;
      const std::size_t plan = MeanAggregator::StateBytes(layout, codec.params);
      if (!aggregator.Init(arena, AllCodecs(), layout, codec.params).ok() ||
          arena.used_bytes() != plan) {
        Log(LogLevel::kError, "FAIL %s: MeanAggregator took %zu B, plan %zu B", codec.name,
            arena.used_bytes(), plan);
        ++failures;
      }
    }
  }
  return failures;
}

Status NoGradient(void*, std::span<const float>, std::uint32_t, std::uint32_t,
                  std::span<float> gradient) {
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  return Status::Ok();
}

std::array<float, kTableDimension> g_initial_model{};
// Sessions cannot be re-initialised: one per codec and algorithm.
protocol::GossipPeerSession g_gossip_peers[kBuiltCodecCount][kCompressedGossip.size()];

int CheckCompressedGossipPlanIsExact() {
  int failures = 0;
  for (std::size_t c = 0; c < kCodecs.size(); ++c) {
    const NamedCodec& codec = kCodecs[c];
    if (!protocol::CheckChocoCodec(codec.params).ok()) continue;
    for (std::size_t a = 0; a < kCompressedGossip.size(); ++a) {
      const protocol::GossipAlgorithm algorithm = kCompressedGossip[a];
      const protocol::GossipConfig config = RingPeerConfig(algorithm, kTableDimension, codec.params);
      protocol::GossipOptions options;
      options.gradient = &NoGradient;
      options.codecs = &AllCodecs();
      options.initial_model = g_initial_model;
      Arena arena(g_arena_storage);
      const std::size_t plan = protocol::GossipPeerSession::ArenaBytes(config);
      const Status init = g_gossip_peers[c][a].Init(arena, config, options);
      if (!init.ok() || arena.used_bytes() != plan) {
        Log(LogLevel::kError, "FAIL %s: the %s peer took %zu B, plan %zu B (%s)", codec.name,
            protocol::GossipAlgorithmName(algorithm), arena.used_bytes(), plan,
            init.ok() ? "ok" : init.reason());
        ++failures;
      }
    }
  }
  return failures;
}

int Run() {
  if (const std::size_t largest = LargestPlanBytes(); largest > g_arena_storage.size()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: the largest plan takes %zu B, the arena holds %zu B",
        largest, g_arena_storage.size());
    return 1;
  }
  const int failures = CheckPlanIsExact() + CheckCompressedGossipPlanIsExact();
  PrintComponentTable();
  PrintLargestDimensions();
  PrintCompressedGossipPeers();
  if (failures != 0) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: %d plan check(s) failed", failures);
    return 1;
  }
  Log(LogLevel::kInfo, "ErrorFeedbackWorker (with and without momentum), MeanAggregator and "
                       "CHOCO and BEER peers took exactly their plan for every codec at d = %zu",
      kTableDimension);
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
