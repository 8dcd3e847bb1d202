// Fuzzing the sessions: thousands of random and mutated frames (bit flips, truncations,
// extensions, splices of valid frames, fixed-up length prefixes, misaligned copies) fed to a
// ServerSession and WorkerSessions, alone and in the middle of a live run. Nothing may crash
// (the suite runs under ASan/UBSan), every frame a session emits must be valid, and the live
// run must still finish: no stalled round.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

class Mutator {
 public:
  explicit Mutator(std::uint32_t seed) : rng_(seed) {}

  std::uint32_t Below(std::uint32_t bound) {
    return std::uniform_int_distribution<std::uint32_t>(0, bound - 1)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // A new frame derived from the corpus (or pure noise).
  std::vector<std::byte> Next(const std::vector<Frame>& corpus) {
    std::vector<std::byte> bytes;
    const std::uint32_t kind = Below(10);
    if (kind == 0 || corpus.empty()) {
      bytes.resize(Below(200) + 1);
      for (std::byte& b : bytes) b = static_cast<std::byte>(Below(256));
    } else {
      const Frame& base = corpus[Below(static_cast<std::uint32_t>(corpus.size()))];
      bytes.assign(base.bytes().begin(), base.bytes().end());
      switch (kind) {
        case 1:  // truncation
          bytes.resize(Below(static_cast<std::uint32_t>(bytes.size())) + 1);
          break;
        case 2:  // extension with garbage
          for (std::uint32_t i = Below(64) + 1; i > 0; --i) {
            bytes.push_back(static_cast<std::byte>(Below(256)));
          }
          break;
        case 3: {  // splice: a prefix of this frame and the tail of another
          const Frame& other = corpus[Below(static_cast<std::uint32_t>(corpus.size()))];
          const std::size_t cut = Below(static_cast<std::uint32_t>(bytes.size()));
          const std::size_t from = Below(static_cast<std::uint32_t>(other.size()));
          bytes.resize(cut);
          bytes.insert(bytes.end(), other.bytes().begin() + static_cast<std::ptrdiff_t>(from),
                       other.bytes().end());
          break;
        }
        case 4:  // overwrite one aligned word (offsets, lengths, union types)
          if (bytes.size() >= 8) {
            const std::size_t at = Below(static_cast<std::uint32_t>(bytes.size() / 4)) * 4;
            const std::uint32_t word = Chance(0.5) ? Below(64) : static_cast<std::uint32_t>(rng_());
            std::memcpy(bytes.data() + at, &word, std::min<std::size_t>(4, bytes.size() - at));
          }
          break;
        case 5:  // untouched: a replay (duplicates, stale rounds, wrong phase)
          break;
        default:  // 1..8 bit flips
          for (std::uint32_t flips = Below(8) + 1; flips > 0; --flips) {
            const std::size_t at = Below(static_cast<std::uint32_t>(bytes.size()));
            bytes[at] ^= static_cast<std::byte>(1u << Below(8));
          }
          break;
      }
    }
    // Usually make the length prefix agree, so the frame reaches the verifier and beyond.
    if (bytes.size() >= 4 && Chance(0.7)) {
      const auto length = static_cast<std::uint32_t>(bytes.size() - 4);
      std::memcpy(bytes.data(), &length, 4);
    }
    return bytes;
  }

 private:
  std::mt19937 rng_;
};

// Aligned (or, rarely, deliberately misaligned) storage for one fuzz frame.
class FuzzBuffer {
 public:
  std::span<const std::byte> Load(const std::vector<std::byte>& bytes, bool misalign) {
    words_.assign(bytes.size() / 8 + 2, 0);
    std::byte* base = std::as_writable_bytes(std::span(words_)).data() + (misalign ? 4 : 0);
    std::memcpy(base, bytes.data(), bytes.size());
    return std::span<const std::byte>(base, bytes.size());
  }

 private:
  std::vector<std::uint64_t> words_;
};

// Every frame a session emits must decode.
void ExpectValidFrames(Session& session, std::uint64_t* count = nullptr) {
  OutgoingFrame out;
  while (session.PollFrame(out)) {
    ASSERT_TRUE(wire::DecodeFrame(out.bytes).ok());
    if (count != nullptr) ++*count;
  }
}

TEST(ProtocolFuzzTest, LiveRunSurvivesInjectedGarbageWithoutStalling) {
  RunConfig config = MeanConfig(24, kCodecId<RandomBlockCodec>, 100);
  config.downlink = DownlinkKind::kAggregate;
  config.participation = 0.75f;
  ServerOptions options;
  options.workers = 4;
  options.quorum = 2;
  options.round_deadline_ns = kSecond;
  options.liveness_timeout_ns = 5 * kSecond;
  WorkerOptions worker_options;
  worker_options.heartbeat_interval_ns = 500 * kMs;
  Cluster cluster(config, options, Targets(4, 24), std::vector<float>(24, 1.0f), worker_options,
                  nullptr, 4096);
  cluster.net().SetLatencyAll(kMs);
  for (PeerId w = 1; w <= 4; ++w) cluster.net().SetComputeNsPerSample(w, kMs);
  Recorder recorder;
  cluster.net().SetInterceptor(&recorder);
  cluster.Start();

  Mutator mutator(12345);
  FuzzBuffer buffer;
  std::vector<Frame> corpus;
  std::size_t recorded = 0;
  std::uint64_t injected = 0;
  const TimeNs limit = 600 * kSecond;
  while (!cluster.server().Finished()) {
    ASSERT_TRUE(cluster.net().Step(limit)) << "stalled in round " << cluster.server().round();
    for (; recorded < recorder.records.size(); ++recorded) {
      if (corpus.size() < 400) corpus.push_back(recorder.records[recorded].frame);
    }
    for (int i = 0; i < 12; ++i) {
      const std::vector<std::byte> bytes = mutator.Next(corpus);
      const bool misalign = mutator.Chance(0.05);
      const PeerId from = mutator.Below(7);  // the server's id, workers 1..4, strangers
      if (mutator.Chance(0.8)) {
        cluster.net().DeliverNow(from, kServerPeer, buffer.Load(bytes, misalign));
      } else {
        const PeerId to = mutator.Below(4) + 1;
        if (!cluster.net().worker_down(to)) {
          cluster.net().DeliverNow(mutator.Chance(0.9) ? kServerPeer : from, to,
                                   buffer.Load(bytes, misalign));
        }
      }
      ++injected;
    }
  }
  // A garbage value that verifies and is finite may have made the model diverge, which ends
  // the run with a failure; either way it ended, and never stalled.
  const ServerCounters& counters = cluster.server().counters();
  EXPECT_TRUE(counters.rounds_completed == config.rounds ||
              cluster.server().status() == Status::DataLoss())
      << counters.rounds_completed;
  EXPECT_GT(injected, 1000u);
  EXPECT_GT(counters.rejected_for(RejectReason::kMalformed), 100u);
  EXPECT_GT(counters.total_rejected(), 500u);
  std::printf("fuzz: %llu frames injected, %llu rejected, %llu rounds, %llu deadline extensions\n",
              static_cast<unsigned long long>(injected),
              static_cast<unsigned long long>(counters.total_rejected()),
              static_cast<unsigned long long>(counters.rounds_completed),
              static_cast<unsigned long long>(counters.deadline_extensions));
}

TEST(ProtocolFuzzTest, SessionsSurviveThousandsOfFramesDirectly) {
  for (const bool majority : {false, true}) {
    RunConfig config =
        majority ? MajorityConfig(40, 1000) : MeanConfig(40, kCodecId<TopKCodec>, 1000);
    config.downlink = DownlinkKind::kAggregate;
    if (!majority) config.codec = QuarterSparse(kCodecId<RandKCodec>);
    ServerOptions options;
    options.workers = 3;
    options.round_deadline_ns = kSecond;
    options.liveness_timeout_ns = 3 * kSecond;

    // A short real run provides the corpus: every kind of frame both ways.
    Cluster cluster(config, options, Targets(3, 40), std::vector<float>(40, 0.5f));
    cluster.net().SetLatencyAll(kMs);
    Recorder recorder;
    cluster.net().SetInterceptor(&recorder);
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilRound(5, 100 * kSecond));
    std::vector<Frame> to_server;
    std::vector<Frame> to_worker;
    for (const Recorder::Record& record : recorder.records) {
      (record.to == kServerPeer ? to_server : to_worker).push_back(record.frame);
    }
    FrameFactory factory;
    to_worker.push_back(factory.Leave(kServerPeer));
    to_worker.push_back(factory.Error(kServerPeer, StatusCode::kInternal, "x"));
    to_server.push_back(factory.Leave(2));

    // Fresh sessions: the server is mid-training, the worker configured.
    ArenaStorage server_storage(ServerSession::ArenaBytes(config, options));
    ServerSession server;
    ASSERT_TRUE(
        server.Init(server_storage.arena, AllCodecs(), config, options, std::vector<float>(40))
            .ok());
    server.Start(0);
    for (PeerId w = 1; w <= 3; ++w) server.OnFrame(w, factory.Join(w).bytes(), 0);
    ASSERT_EQ(server.phase(), ServerPhase::kTraining);
    ExpectValidFrames(server);

    // A worker that a replayed Leave (or a server Error while joining) ends is replaced by a
    // fresh one, so the fuzzing goes on.
    QuadraticProblem problem;
    problem.target = PseudoRandom(40, 1, 1.0f);
    std::unique_ptr<ArenaStorage> worker_storage;
    std::unique_ptr<WorkerSession> worker;
    int restarts = -1;
    std::uint64_t worker_malformed = 0;
    const auto restart_worker = [&] {
      if (worker) worker_malformed += worker->counters().malformed;
      worker_storage = std::make_unique<ArenaStorage>(WorkerSession::ArenaBytes(config));
      worker = std::make_unique<WorkerSession>();
      WorkerOptions worker_options;
      worker_options.gradient = &QuadraticGradient;
      worker_options.codecs = &AllCodecs();
      worker_options.user = &problem;
      ASSERT_TRUE(worker->Init(worker_storage->arena, worker_options).ok());
      worker->Start(0);
      ExpectValidFrames(*worker);
      worker->OnFrame(kServerPeer, factory.Welcome(ToWelcomeInfo(config, 2, 3)).bytes(), 0);
      ASSERT_TRUE(worker->configured());
      ++restarts;
    };
    restart_worker();

    Mutator mutator(majority ? 7u : 8u);
    FuzzBuffer buffer;
    std::uint64_t emitted = 0;
    TimeNs now = 0;
    for (int i = 0; i < 10000; ++i) {
      now += mutator.Below(50) * kMs;
      const bool misalign = mutator.Chance(0.02);
      server.OnFrame(mutator.Below(5), buffer.Load(mutator.Next(to_server), misalign), now);
      ExpectValidFrames(server, &emitted);
      if (worker->Finished()) restart_worker();
      worker->OnFrame(mutator.Chance(0.95) ? kServerPeer : 1,
                      buffer.Load(mutator.Next(to_worker), misalign), now);
      ExpectValidFrames(*worker, &emitted);
      if (server.NextWakeup() <= now) {
        server.OnTimer(now);
        ExpectValidFrames(server, &emitted);
      }
      if (worker->NextWakeup() <= now) {
        worker->OnTimer(now);
        ExpectValidFrames(*worker, &emitted);
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(server.counters().total_rejected(), 5000u);
    worker_malformed += worker->counters().malformed;
    EXPECT_GT(worker_malformed, 1000u);
    std::printf("fuzz direct (%s): server rejected %llu, worker restarted %d times\n",
                majority ? "majority" : "mean",
                static_cast<unsigned long long>(server.counters().total_rejected()), restarts);
    EXPECT_GT(emitted, 0u);
    // Whatever it went through, the server's model is finite or the run was stopped.
    if (server.status().ok()) {
      for (const float value : server.model()) ASSERT_TRUE(std::isfinite(value));
    }
  }
}

}  // namespace
}  // namespace edgesgd::protocol::testing
