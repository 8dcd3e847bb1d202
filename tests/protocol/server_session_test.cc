// ServerSession: joining, quorum and deadlines, stragglers, drop-outs and rejoins, partial
// participation, and every rejection reason — each bad frame counted and logged while the round
// it arrived in still completes.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "edgesgd/core/random.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 16;

ServerOptions Options(std::uint32_t workers, std::uint32_t quorum, TimeNs deadline = kSecond,
                      TimeNs liveness = kNever) {
  ServerOptions options;
  options.workers = workers;
  options.quorum = quorum;
  options.round_deadline_ns = deadline;
  options.liveness_timeout_ns = liveness;
  return options;
}

std::vector<RoundEvent> RoundsFor(Cluster& cluster) { return cluster.DrainRounds(); }

// Workers that send heartbeats every `interval` while not sampled.
WorkerOptions Heartbeats(TimeNs interval) {
  WorkerOptions options;
  options.heartbeat_interval_ns = interval;
  return options;
}

// A run of options.workers workers (Targets) from a model of ones, on 1 ms links.
class LinkedCluster : public Cluster {
 public:
  LinkedCluster(const RunConfig& config, const ServerOptions& options,
                WorkerOptions worker_options = {})
      : Cluster(config, options, Targets(options.workers, kDim), std::vector<float>(kDim, 1.0f),
                std::move(worker_options)) {
    net().SetLatencyAll(kMs);
  }

  // Starts the run and runs it until round `round` begins (within 100 s).
  bool StartUntilRound(std::uint32_t round) {
    Start();
    return RunUntilRound(round, 100 * kSecond);
  }
};

// A started server of a five-round mean run of two workers (quorum 1), fed frames by hand.
struct StartedServer {
  StartedServer() {
    const Status init =
        server.Init(storage.arena, AllCodecs(), config, Options(2, 1), std::vector<float>(kDim));
    EXPECT_TRUE(init.ok()) << init.reason();
    server.Start(0);
  }

  const RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 5);
  ArenaStorage storage{ServerSession::ArenaBytes(config, Options(2, 1))};
  ServerSession server;
  FrameFactory factory;
};

// ---- Joining ----

TEST(ServerSessionTest, WaitsForAllWorkersThenStarts) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 5), Options(3, 3));
  cluster.net().SetWorkerDown(3, true);
  cluster.Start();
  cluster.net().RunUntil([] { return false; }, 5 * kSecond);
  EXPECT_EQ(cluster.server().phase(), ServerPhase::kJoining);
  EXPECT_EQ(cluster.server().joined_workers(), 2u);
  EXPECT_EQ(cluster.worker(1).phase(), WorkerPhase::kTraining);

  cluster.net().SetWorkerDown(3, false);
  cluster.net().StartWorker(3);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, 5u);
  EXPECT_EQ(cluster.server().counters().joins, 3u);
  EXPECT_EQ(cluster.server().counters().updates_accepted, 15u);
}

TEST(ServerSessionTest, JoinTimeoutStartsWithAQuorumOfWorkers) {
  ServerOptions options = Options(3, 2);
  options.join_timeout_ns = 2 * kSecond;
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 5), options);
  cluster.net().SetWorkerDown(3, true);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  const std::vector<RoundEvent> rounds = RoundsFor(cluster);
  ASSERT_EQ(rounds.size(), 5u);
  EXPECT_GE(rounds[0].time_closed, 2 * kSecond);
  for (const RoundEvent& round : rounds) {
    EXPECT_EQ(round.selected, 2u);
    EXPECT_EQ(round.reported, 2u);
  }
}

TEST(ServerSessionTest, IncompatibleWorkerGetsAnErrorWithTheReason) {
  StartedServer started;
  ServerSession& server = started.server;
  FrameFactory& factory = started.factory;
  wire::JoinInfo join;
  join.memory_bytes = 64;  // far below WorkerSession::WelcomeArenaBytes
  const Frame frame = factory.Join(1, join);
  server.OnFrame(1, frame.bytes(), 0);
  OutgoingFrame out;
  ASSERT_TRUE(server.PollFrame(out));
  EXPECT_EQ(out.to, 1u);
  const Result<wire::FrameView> view = wire::DecodeFrame(out.bytes);
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view.value().kind, wire::MessageKind::kError);
  EXPECT_EQ(view.value().error.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(view.value().error.reason, "worker memory is too small for this run");
  EXPECT_FALSE(server.PollFrame(out));
  EXPECT_EQ(server.counters().rejected_for(RejectReason::kIncompatible), 1u);
  EXPECT_FALSE(server.IsJoined(1));

  // A worker without the codec is refused too; one that states nothing is admitted.
  join = {};
  join.codecs = wire::CodecBit(kCodecId<IdentityCodec>);
  server.OnFrame(2, factory.Join(2, join).bytes(), 0);
  ASSERT_TRUE(server.PollFrame(out));
  EXPECT_EQ(wire::DecodeFrame(out.bytes).value().error.code, StatusCode::kFailedPrecondition);
  server.OnFrame(2, factory.Join(wire::kUnassignedDevice).bytes(), 0);
  ASSERT_TRUE(server.PollFrame(out));
  const wire::FrameView welcome = wire::DecodeFrame(out.bytes).value();
  ASSERT_EQ(welcome.kind, wire::MessageKind::kWelcome);
  EXPECT_EQ(welcome.welcome.assigned_id, 2u);
  EXPECT_TRUE(server.IsJoined(2));
}

// ---- Quorum, deadlines, stragglers ----

TEST(ServerSessionTest, QuorumClosesTheRoundAtTheDeadline) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 8), Options(4, 3));
  ASSERT_TRUE(cluster.StartUntilRound(2));
  const TimeNs round_two_started = cluster.net().now();
  cluster.net().SetWorkerDown(4, true);  // silently: no liveness timeout, no OnPeerLost
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  const std::vector<RoundEvent> rounds = RoundsFor(cluster);
  ASSERT_EQ(rounds.size(), 8u);
  EXPECT_EQ(rounds[1].reported, 4u);
  for (std::size_t r = 2; r < rounds.size(); ++r) {
    EXPECT_EQ(rounds[r].selected, 4u);
    EXPECT_EQ(rounds[r].reported, 3u);
    EXPECT_EQ(rounds[r].deadline_extensions, 0u);
    // Each round lasts exactly its deadline: it started when the previous one closed.
    const TimeNs started = r == 2 ? round_two_started : rounds[r - 1].time_closed;
    EXPECT_EQ(rounds[r].time_closed - started, kSecond) << "round " << r;
  }
  EXPECT_EQ(cluster.server().counters().deadline_extensions, 0u);
}

TEST(ServerSessionTest, BelowQuorumResendsAndExtendsUntilTheWorkerReturns) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 4), Options(3, 3));
  Recorder recorder;
  cluster.net().SetInterceptor(&recorder);
  ASSERT_TRUE(cluster.StartUntilRound(2));
  cluster.net().SetWorkerDown(3, true);
  cluster.net().RunUntil([] { return false; }, cluster.net().now() + 3500 * kMs);
  EXPECT_EQ(cluster.server().round(), 2u);
  EXPECT_EQ(cluster.server().reported_count(), 2u);
  EXPECT_EQ(cluster.server().counters().deadline_extensions, 3u);
  // The extensions re-sent the broadcast to the missing worker only.
  EXPECT_EQ(recorder.Find(kServerPeer, 1, wire::MessageKind::kModelBroadcast).size(), 3u);
  EXPECT_EQ(recorder.Find(kServerPeer, 3, wire::MessageKind::kModelBroadcast).size(), 3u);

  cluster.net().SetWorkerDown(3, false);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  const std::vector<RoundEvent> rounds = RoundsFor(cluster);
  ASSERT_EQ(rounds.size(), 4u);
  EXPECT_EQ(rounds[2].reported, 3u);
  EXPECT_EQ(rounds[2].deadline_extensions, 4u);
  EXPECT_EQ(rounds[3].reported, 3u);
}

TEST(ServerSessionTest, StragglerIsLeftBehindAndItsUpdateRejectedAsLate) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 6), Options(3, 2));
  // An update costs 8 samples * 10 ms: a full round takes 82 ms from broadcast to last update.
  for (PeerId w = 1; w <= 3; ++w) cluster.net().SetComputeNsPerSample(w, 10 * kMs);
  Recorder recorder;
  recorder.policy = [](const Recorder::Record& record) {
    Verdict verdict;
    if (record.from == 3 && record.kind == wire::MessageKind::kUpdate && record.round == 2) {
      // Arrives 82 + 950 ms after round 2 opened: past its 1 s deadline, inside round 3 (which
      // opens at 1000 ms and closes at 1082 ms).
      verdict.extra_delay = 950 * kMs;
    }
    return verdict;
  };
  cluster.net().SetInterceptor(&recorder);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));

  const std::vector<RoundEvent> rounds = RoundsFor(cluster);
  ASSERT_EQ(rounds.size(), 6u);
  for (const RoundEvent& round : rounds) {
    EXPECT_EQ(round.reported, round.round == 2 ? 2u : 3u) << "round " << round.round;
  }
  EXPECT_EQ(rounds[3].rejected, 1u);  // the straggler's update arrived during round 3
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kLate), 1u);
  EXPECT_EQ(cluster.server().counters().total_rejected(), 1u);
  const std::vector<RejectEvent> rejects = cluster.DrainRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].peer, 3u);
  EXPECT_EQ(rejects[0].reason, RejectReason::kLate);
  EXPECT_EQ(rejects[0].round, 2u);
  EXPECT_STREQ(RejectReasonName(rejects[0].reason), "late");
}

// ---- Drop-outs ----

TEST(ServerSessionTest, SilentDropOutIsTimedOutAndRoundsKeepCompleting) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 10),
                        Options(4, 4, kSecond, 3 * kSecond), Heartbeats(500 * kMs));
  ASSERT_TRUE(cluster.StartUntilRound(3));
  cluster.net().SetWorkerDown(2, true);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, 10u);
  EXPECT_EQ(cluster.server().counters().workers_lost, 1u);
  EXPECT_FALSE(cluster.server().IsLive(2));
  const std::vector<RoundEvent> rounds = RoundsFor(cluster);
  EXPECT_EQ(rounds[3].reported, 3u);
  for (std::size_t r = 4; r < rounds.size(); ++r) {
    EXPECT_EQ(rounds[r].selected, 3u);
    EXPECT_EQ(rounds[r].reported, 3u);
  }
}

TEST(ServerSessionTest, LostLinkDropsTheWorkerAndARejoinGetsTheFullModel) {
  RunConfig config = MeanConfig(kDim, kCodecId<RandKCodec>, 12);
  config.downlink = DownlinkKind::kAggregate;
  LinkedCluster cluster(config, Options(3, 3));
  Recorder recorder;
  cluster.net().SetInterceptor(&recorder);
  ASSERT_TRUE(cluster.StartUntilRound(3));
  cluster.net().SetWorkerDown(2, true);
  cluster.net().LoseLink(2);
  EXPECT_FALSE(cluster.server().IsLive(2));
  ASSERT_TRUE(cluster.RunUntilRound(6, 100 * kSecond));
  const std::vector<RoundEvent> before = RoundsFor(cluster);
  EXPECT_EQ(before.back().selected, 2u);
  EXPECT_EQ(before.back().deadline_extensions, 0u);

  // The link comes back: the worker re-joins and is sent the whole model, not an aggregate.
  cluster.net().SetWorkerDown(2, false);
  const std::size_t first_new = recorder.records.size();
  cluster.net().WorkerLostServer(2);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rejoins, 1u);
  EXPECT_EQ(cluster.worker(2).counters().resyncs, 1u);
  const Recorder::Record* first_broadcast = nullptr;
  for (std::size_t i = first_new; i < recorder.records.size(); ++i) {
    const Recorder::Record& record = recorder.records[i];
    if (record.to == 2 && record.kind == wire::MessageKind::kModelBroadcast) {
      first_broadcast = &record;
      break;
    }
  }
  ASSERT_NE(first_broadcast, nullptr);
  EXPECT_EQ(first_broadcast->content, wire::BroadcastContent::kModel);
  const std::vector<RoundEvent> after = RoundsFor(cluster);
  EXPECT_EQ(after.back().reported, 3u);
  EXPECT_EQ(std::memcmp(cluster.worker(2).model().data(), cluster.worker(1).model().data(),
                        kDim * sizeof(float)),
            0);
}

TEST(ServerSessionTest, TimedOutWorkerIsRevivedByItsHeartbeats) {
  LinkedCluster cluster(MeanConfig(kDim, kCodecId<TopKCodec>, 12),
                        Options(3, 2, kSecond, 2 * kSecond), Heartbeats(500 * kMs));
  ASSERT_TRUE(cluster.StartUntilRound(2));
  cluster.net().SetWorkerDown(3, true);
  cluster.net().RunUntil([&] { return !cluster.server().IsLive(3); }, 100 * kSecond);
  EXPECT_FALSE(cluster.server().IsLive(3));
  cluster.net().SetWorkerDown(3, false);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().revivals, 1u);
  EXPECT_EQ(RoundsFor(cluster).back().reported, 3u);
}

TEST(ServerSessionTest, NeverStallsWhenEverySampledWorkerVanishes) {
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 8);
  config.participation = 0.25f;  // one worker per round
  LinkedCluster cluster(config, Options(4, 1, kSecond, 2 * kSecond), Heartbeats(300 * kMs));
  ASSERT_TRUE(cluster.StartUntilRound(3));
  PeerId sampled = 0;
  for (PeerId w = 1; w <= 4; ++w) {
    if (cluster.server().IsSelected(w)) sampled = w;
  }
  ASSERT_NE(sampled, 0u);
  cluster.net().SetWorkerDown(sampled, true);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, 8u);
  EXPECT_GE(cluster.server().counters().top_ups, 1u);
}

// ---- Participation ----

// The documented sampling, reimplemented: a partial Fisher-Yates shuffle of the live workers
// (ascending ids) driven by CounterRng(seed, round, 0, StreamId(kParticipation)).
std::set<PeerId> ExpectedSample(std::uint64_t seed, std::uint32_t round, std::uint32_t workers,
                                float participation) {
  std::vector<PeerId> ids;
  for (PeerId w = 1; w <= workers; ++w) ids.push_back(w);
  auto take = static_cast<std::uint32_t>(static_cast<double>(participation) * workers + 0.5);
  take = std::clamp<std::uint32_t>(take, 1, workers);
  if (take < workers) {
    CounterRng rng(seed, round, 0, StreamId(RandomPurpose::kParticipation));
    for (std::uint32_t i = 0; i < take; ++i) {
      std::swap(ids[i], ids[i + rng.NextBelow(workers - i)]);
    }
  }
  return std::set<PeerId>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(take));
}

std::vector<std::set<PeerId>> SampledSets(std::uint64_t seed) {
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 20);
  config.participation = 0.3f;
  config.seed = seed;
  LinkedCluster cluster(config, Options(10, 1));
  Recorder recorder;
  cluster.net().SetInterceptor(&recorder);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  std::vector<std::set<PeerId>> sets(20);
  for (const Recorder::Record& record : recorder.records) {
    if (record.from == kServerPeer && record.kind == wire::MessageKind::kModelBroadcast) {
      sets.at(record.round).insert(record.to);
    }
  }
  for (const RoundEvent& round : cluster.DrainRounds()) {
    EXPECT_EQ(round.selected, 3u);
    EXPECT_EQ(round.reported, 3u);
  }
  return sets;
}

TEST(ServerSessionTest, PartialParticipationSamplesDeterministically) {
  const std::vector<std::set<PeerId>> first = SampledSets(42);
  const std::vector<std::set<PeerId>> again = SampledSets(42);
  const std::vector<std::set<PeerId>> other = SampledSets(43);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  std::set<PeerId> everyone;
  for (std::uint32_t round = 0; round < 20; ++round) {
    EXPECT_EQ(first[round].size(), 3u);
    EXPECT_EQ(first[round], ExpectedSample(42, round, 10, 0.3f)) << "round " << round;
    everyone.insert(first[round].begin(), first[round].end());
  }
  EXPECT_GE(everyone.size(), 8u);  // the sample moves around
}

TEST(ServerSessionTest, WorkerThatMissedARoundGetsTheFullModel) {
  RunConfig config = MeanConfig(kDim, kCodecId<RandomBlockCodec>, 8);
  config.downlink = DownlinkKind::kAggregate;
  LinkedCluster cluster(config, Options(3, 2));
  Recorder recorder;
  recorder.policy = [](const Recorder::Record& record) {
    Verdict verdict;
    verdict.drop = record.from == kServerPeer && record.to == 3 && record.round == 2 &&
                   record.kind == wire::MessageKind::kModelBroadcast;
    return verdict;
  };
  cluster.net().SetInterceptor(&recorder);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  const auto to_three = recorder.Find(kServerPeer, 3, wire::MessageKind::kModelBroadcast);
  ASSERT_EQ(to_three.size(), 8u);
  for (const Recorder::Record* record : to_three) {
    const bool full = record->round == 0 || record->round == 3;
    EXPECT_EQ(record->content,
              full ? wire::BroadcastContent::kModel : wire::BroadcastContent::kAggregate)
        << "round " << record->round;
  }
  EXPECT_EQ(RoundsFor(cluster)[2].reported, 2u);
  EXPECT_EQ(cluster.worker(3).counters().resyncs, 0u);
  for (PeerId w = 2; w <= 3; ++w) {
    EXPECT_EQ(std::memcmp(cluster.worker(w).model().data(), cluster.worker(1).model().data(),
                          kDim * sizeof(float)),
              0);
  }
}

// ---- Rejections ----

// A 3-worker run paused with round 2 just opened (broadcasts in flight, no update in yet).
class ServerRejectionTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kRounds = 5;

  void SetUp() override {
    config_ = MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
    cluster_ = std::make_unique<Cluster>(config_, Options(3, 3), Targets(3, kDim),
                                         std::vector<float>(kDim, 1.0f));
    cluster_->net().SetLatencyAll(kMs);
    cluster_->net().SetInterceptor(&recorder_);
    cluster_->Start();
    ASSERT_TRUE(cluster_->RunUntilRound(2, 100 * kSecond));
    ASSERT_EQ(cluster_->server().reported_count(), 0u);
  }

  // Delivers `frame` to the server now, as if from `from`.
  void Inject(PeerId from, const Frame& frame) {
    cluster_->net().DeliverNow(from, 0, frame.bytes());
  }
  void Inject(PeerId from, std::span<const std::byte> bytes) {
    cluster_->net().DeliverNow(from, 0, bytes);
  }

  Frame ValidUpdate(PeerId worker, std::uint32_t round, const CodecParams& codec) {
    return factory_.Update(worker, worker, round, codec, config_.layout,
                           PseudoRandom(kDim, round, 1.0f), config_.seed);
  }

  // The run completes every round with all three workers.
  void ExpectRunCompletes() {
    ASSERT_TRUE(cluster_->RunUntilFinished(100 * kSecond));
    EXPECT_EQ(cluster_->server().counters().rounds_completed, kRounds);
    for (const RoundEvent& round : cluster_->DrainRounds()) {
      EXPECT_EQ(round.reported, 3u) << "round " << round.round;
      EXPECT_EQ(round.deadline_extensions, 0u);
    }
  }

  void ExpectRejected(RejectReason reason, std::uint64_t count, PeerId peer, std::uint32_t round) {
    EXPECT_EQ(cluster_->server().counters().rejected_for(reason), count)
        << RejectReasonName(reason);
    EXPECT_EQ(cluster_->server().counters().total_rejected(), count);
    const std::vector<RejectEvent> events = cluster_->DrainRejects();
    ASSERT_EQ(events.size(), count);
    for (const RejectEvent& event : events) {
      EXPECT_EQ(event.reason, reason);
      EXPECT_EQ(event.peer, peer);
      EXPECT_EQ(event.round, round);
    }
  }

  // One field of each rejection logged since the last drain, in order.
  template <typename Field>
  std::vector<Field> DrainRejected(Field RejectEvent::*field) {
    std::vector<Field> values;
    for (const RejectEvent& event : cluster_->DrainRejects()) values.push_back(event.*field);
    return values;
  }

  RunConfig config_;
  std::unique_ptr<Cluster> cluster_;
  Recorder recorder_;
  FrameFactory factory_;
};

TEST_F(ServerRejectionTest, Malformed) {
  const Frame valid = ValidUpdate(1, 2, config_.codec);
  // Random bytes; a truncation; a bit flip in the FlatBuffer's offsets; the frame at an
  // address that is not 8-byte aligned.
  std::vector<std::uint64_t> noise(8, 0x0123456789ABCDEFull);
  Inject(1, std::as_bytes(std::span(noise)));
  Inject(1, valid.bytes().first(valid.size() - 9));
  Frame flipped = valid;
  flipped.mutable_bytes()[4] ^= std::byte{0x40};
  Inject(1, flipped);
  std::vector<std::uint64_t> shifted((valid.size() + 16) / 8);
  std::byte* base = std::as_writable_bytes(std::span(shifted)).data() + 4;
  std::copy(valid.bytes().begin(), valid.bytes().end(), base);
  Inject(1, std::span<const std::byte>(base, valid.size()));
  ExpectRejected(RejectReason::kMalformed, 4, 1, 2);
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, AWorkerThatRefusedTheRunIsCountedAndGone) {
  const std::uint64_t lost = cluster_->server().counters().workers_lost;
  Inject(2, factory_.Leave(2, wire::LeaveReason::kRefusedRun));
  EXPECT_EQ(cluster_->server().counters().refused_runs, 1u);
  EXPECT_EQ(cluster_->server().counters().workers_lost, lost + 1);
  EXPECT_FALSE(cluster_->server().IsLive(2));
  // Other reasons are ordinary departures.
  Inject(3, factory_.Leave(3, wire::LeaveReason::kShutdown));
  EXPECT_EQ(cluster_->server().counters().refused_runs, 1u);
}

TEST_F(ServerRejectionTest, UnknownSender) {
  // A peer that is not a worker; a worker spoofing another's id in the header; an update whose
  // worker field names someone else.
  Inject(9, ValidUpdate(9, 2, config_.codec));
  Inject(2, factory_.Update(1, 1, 2, config_.codec, config_.layout, PseudoRandom(kDim, 2, 1.0f),
                            config_.seed));
  Frame heartbeat = factory_.Heartbeat(7);
  cluster_->net().DeliverNow(7, 0, heartbeat.bytes());
  EXPECT_EQ(cluster_->server().counters().rejected_for(RejectReason::kUnknownSender), 3u);
  EXPECT_EQ(DrainRejected(&RejectEvent::peer), (std::vector<PeerId>{9, 2, 7}));
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, LateAndStaleReplays) {
  const auto updates = recorder_.Find(1, kServerPeer, wire::MessageKind::kUpdate);
  ASSERT_EQ(updates.size(), 2u);  // rounds 0 and 1
  Inject(1, updates[1]->frame);   // round 1: late
  EXPECT_EQ(cluster_->server().counters().rejected_for(RejectReason::kLate), 1u);
  Inject(1, updates[0]->frame);  // round 0: stale
  EXPECT_EQ(cluster_->server().counters().rejected_for(RejectReason::kStale), 1u);
  EXPECT_EQ(DrainRejected(&RejectEvent::round), (std::vector<std::uint32_t>{1, 0}));
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, Future) {
  Inject(1, ValidUpdate(1, 4, config_.codec));
  ExpectRejected(RejectReason::kFuture, 1, 1, 4);
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, Duplicate) {
  // Worker 1's real round-2 update arrives twice.
  recorder_.policy = [](const Recorder::Record& record) {
    Verdict verdict;
    if (record.from == 1 && record.kind == wire::MessageKind::kUpdate && record.round == 2) {
      verdict.copies = 2;
    }
    return verdict;
  };
  ASSERT_TRUE(cluster_->RunUntilRound(3, 100 * kSecond));
  ExpectRejected(RejectReason::kDuplicate, 1, 1, 2);
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, WrongCodec) {
  Inject(1, ValidUpdate(1, 2, IdentityParams{}));
  const auto& top_k = std::get<TopKParams>(config_.codec);
  Inject(1, ValidUpdate(1, 2, RandKParams{.k_ratio = top_k.k_ratio}));
  ExpectRejected(RejectReason::kWrongCodec, 2, 1, 2);
  ExpectRunCompletes();
}

// Under DQ-SGD an update may carry the level count of any width in the schedule's bit range (a
// worker's own choice) and no other: below the range, between widths, or above the frames'
// sizing are all the wrong codec.
TEST(ServerScheduleTest, AcceptsOnlyTheSchedulesLevelCounts) {
  RunConfig config = MeanConfig(kDim, kCodecId<QsgdCodec>, 4);
  const QsgdParams dq{.schedule = QuantScheduleKind::kDq,
                      .bits_min = 3,
                      .bits_max = 5,
                      .dq_k = 20.0f,
                      .dq_rho = 0.99f};
  config.codec = dq;
  LinkedCluster cluster(config, Options(3, 3));
  ASSERT_TRUE(cluster.StartUntilRound(2));
  ASSERT_EQ(cluster.server().reported_count(), 0u);
  FrameFactory factory;
  // What a sender's round parameters look like: a fixed level count in the run's buckets.
  for (const std::uint32_t levels : {1u, 5u, 31u}) {
    const QsgdParams codec{.levels = levels, .bucket = dq.bucket};
    const Frame frame = factory.Update(1, 1, 2, codec, config.layout,
                                       PseudoRandom(kDim, levels, 1.0f), config.seed);
    cluster.net().DeliverNow(1, 0, frame.bytes());
  }
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kWrongCodec), 3u);
  // A 3-bit update (the narrowest the schedule allows) from worker 1 is accepted; its own
  // update then arrives as a duplicate.
  const QsgdParams narrow{.levels = QsgdLevelsForBits(3).value(), .bucket = dq.bucket};
  const Frame frame =
      factory.Update(1, 1, 2, narrow, config.layout, PseudoRandom(kDim, 9, 1.0f), config.seed);
  cluster.net().DeliverNow(1, 0, frame.bytes());
  EXPECT_EQ(cluster.server().reported_count(), 1u);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, 4u);
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kWrongCodec), 3u);
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kDuplicate), 1u);
}

TEST_F(ServerRejectionTest, BadPayload) {
  // A top_k index out of range, and a NaN value: the frame verifies, the payload does not.
  Frame out_of_range = ValidUpdate(1, 2, config_.codec);
  {
    const wire::FrameView view = out_of_range.View();
    const auto offset = reinterpret_cast<const std::byte*>(view.payload.view.indices.data()) -
                        out_of_range.bytes().data();
    const std::uint32_t bad_index = kDim + 3;
    std::memcpy(out_of_range.mutable_bytes().data() + offset, &bad_index, sizeof(bad_index));
  }
  Inject(1, out_of_range);
  Frame not_finite = ValidUpdate(1, 2, config_.codec);
  {
    const wire::FrameView view = not_finite.View();
    const auto offset = reinterpret_cast<const std::byte*>(view.payload.view.values.data()) -
                        not_finite.bytes().data();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(not_finite.mutable_bytes().data() + offset, &nan, sizeof(nan));
  }
  Inject(1, not_finite);
  ExpectRejected(RejectReason::kBadPayload, 2, 1, 2);
  ExpectRunCompletes();
}

TEST_F(ServerRejectionTest, UnexpectedMessage) {
  // A worker sending what only a server sends: a Welcome (signed as worker 1) and a broadcast
  // (with the server's own id, from the server's peer id, which no worker is).
  Inject(1, factory_.Welcome(ToWelcomeInfo(config_, 1, 3), 1));
  Inject(0, factory_.Broadcast(2, wire::BroadcastContent::kModel, CodecParams{}, config_.layout,
                               std::vector<float>(kDim, 0.0f), 1));
  EXPECT_EQ(cluster_->server().counters().rejected_for(RejectReason::kUnexpectedMessage), 2u);
  const std::vector<RejectEvent> events = cluster_->DrainRejects();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].peer, 1u);  // the Welcome's sender
  EXPECT_EQ(events[1].round, 2u);
  ExpectRunCompletes();
}

TEST(ServerRejectionStandaloneTest, NotSelected) {
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 5);
  config.participation = 0.5f;
  LinkedCluster cluster(config, Options(4, 1));
  ASSERT_TRUE(cluster.StartUntilRound(2));
  PeerId idle = 0;
  for (PeerId w = 1; w <= 4; ++w) {
    if (!cluster.server().IsSelected(w)) idle = w;
  }
  ASSERT_NE(idle, 0u);
  FrameFactory factory;
  const Frame update = factory.Update(idle, idle, 2, config.codec, config.layout,
                                      PseudoRandom(kDim, 1, 1.0f), config.seed);
  cluster.net().DeliverNow(idle, kServerPeer, update.bytes());
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kNotSelected), 1u);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  for (const RoundEvent& round : cluster.DrainRounds()) EXPECT_EQ(round.reported, 2u);
}

// A dense update is checked like any other payload: one NaN from one worker is refused, the
// worker's own update is taken after it, and the model stays finite to the end of the run.
TEST(ServerRejectionStandaloneTest, ADenseUpdateHoldingANaNIsRefusedAndTheRunGoesOn) {
  const RunConfig config = MeanConfig(kDim, kCodecId<IdentityCodec>, 4);
  LinkedCluster cluster(config, Options(2, 2));
  ASSERT_TRUE(cluster.StartUntilRound(2));
  std::vector<float> poisoned = PseudoRandom(kDim, 1, 1.0f);
  poisoned[kDim / 2] = std::numeric_limits<float>::quiet_NaN();
  FrameFactory factory;
  const Frame update = factory.Update(1, 1, 2, config.codec, config.layout, poisoned, config.seed);
  cluster.net().DeliverNow(1, kServerPeer, update.bytes());
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kBadPayload), 1u);
  EXPECT_EQ(cluster.server().reported_count(), 0u);
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, 4u);
  for (const float value : cluster.server().model()) ASSERT_TRUE(std::isfinite(value));
}

TEST(ServerRejectionStandaloneTest, UpdateBeforeTrainingIsUnexpected) {
  StartedServer started;
  ServerSession& server = started.server;
  const RunConfig& config = started.config;
  server.OnFrame(1, started.factory.Join(1).bytes(), 0);
  server.OnFrame(
      1,
      started.factory
          .Update(1, 1, 0, config.codec, config.layout, std::vector<float>(kDim, 1.0f), config.seed)
          .bytes(),
      0);
  EXPECT_EQ(server.counters().rejected_for(RejectReason::kUnexpectedMessage), 1u);
  EXPECT_EQ(server.phase(), ServerPhase::kJoining);
}

// ---- Init, memory, failure ----

TEST(ServerInitTest, ArenaBytesIsExactAndInitChecksItsInputs) {
  // Mean with a summable codec, mean with one the server re-compresses, majority vote.
  for (const int aggregation : {0, 1, 2}) {
    for (const DownlinkKind downlink : {DownlinkKind::kModel, DownlinkKind::kAggregate}) {
      RunConfig config =
          aggregation == 2
              ? MajorityConfig(100, 3)
              : MeanConfig(100, aggregation == 0 ? kCodecId<RandKCodec> : kCodecId<TopKCodec>, 3);
      config.downlink = downlink;
      const ServerOptions options = Options(7, 3);
      const std::size_t bytes = ServerSession::ArenaBytes(config, options);
      ASSERT_GT(bytes, 0u);
      {
        ArenaStorage storage(bytes);
        ServerSession server;
        ASSERT_TRUE(
            server.Init(storage.arena, AllCodecs(), config, options, std::vector<float>(100)).ok());
        EXPECT_EQ(storage.arena.used_bytes(), bytes);
        const Status again =
            server.Init(storage.arena, AllCodecs(), config, options, std::vector<float>(100));
        EXPECT_EQ(again, Status::FailedPrecondition());
      }
      ArenaStorage small(bytes - 16);
      ServerSession server;
      const Status check =
          server.Init(small.arena, AllCodecs(), config, options, std::vector<float>(100));
      EXPECT_EQ(check, Status::ResourceExhausted());
      EXPECT_EQ(small.arena.used_bytes(), 0u);
    }
  }
  ArenaStorage storage(1 << 20);
  ServerSession server;
  RunConfig config = MeanConfig(100, kCodecId<RegTopKCodec>, 3);
  EXPECT_STREQ(
      server.Init(storage.arena, AllCodecs(), config, Options(2, 1), std::vector<float>(99))
          .reason(),
      "the initial model's size is not the layout's dimension");
  // A program that does not register the run's codec cannot serve it.
  const Status unregistered = server.Init(storage.arena, test_util::TopKOnlyCodecs(), config,
                                          Options(2, 1), std::vector<float>(100));
  EXPECT_EQ(unregistered, Status::FailedPrecondition());
  EXPECT_EQ(storage.arena.used_bytes(), 0u);
  config.downlink = DownlinkKind::kAggregate;
  const Status check =
      server.Init(storage.arena, AllCodecs(), config, Options(2, 1), std::vector<float>(100));
  EXPECT_EQ(check, Status::InvalidArgument());
  EXPECT_NE(std::string(check.reason()).find("downlink aggregate"), std::string::npos);
  EXPECT_STREQ(server
                   .Init(storage.arena, AllCodecs(), MeanConfig(100, kCodecId<TopKCodec>, 3),
                         Options(2, 3), std::vector<float>(100))
                   .reason(),
               "quorum must be in 1..workers");
}

TEST(ServerInitTest, DivergedModelEndsTheRunWithAFailure) {
  RunConfig config = MeanConfig(kDim, kCodecId<IdentityCodec>, 500);
  config.feedback.learning_rate = 3.0f;  // |1 - 3| > 1: x - t doubles every round
  config.feedback.momentum = 0.0f;
  LinkedCluster cluster(config, Options(2, 2));
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(100 * kSecond));
  EXPECT_EQ(cluster.server().status(), Status::DataLoss());
  EXPECT_LT(cluster.server().counters().rounds_completed, 500u);
  for (PeerId w = 1; w <= 2; ++w) {
    EXPECT_TRUE(cluster.worker(w).Finished());
    EXPECT_EQ(cluster.worker(w).leave_reason(), wire::LeaveReason::kFailure);
  }
}

}  // namespace
}  // namespace edgesgd::protocol::testing
