#pragma once

// A tiny deterministic driver for the protocol tests: one ServerSession and N WorkerSessions
// exchanging frames over in-memory links under a fake clock, plus the quadratic problem the
// workers train on (gradient_i(x) = x - target_i, optimum: the mean of the targets for mean
// aggregation, the coordinate-wise median for majority vote). It is not the simulator
// (transport/sim); it only moves frames, with per-link latency, per-sample compute time, links
// that go down and an interceptor that can drop, delay or duplicate any frame.
//
// Frames are copied into preallocated, 8-byte aligned slots, so once constructed the network
// does not allocate (the allocation test drives it too).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/aggregation/fednova.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/protocol/worker_session.h"

namespace edgesgd::protocol::testing {

inline constexpr TimeNs kMs = 1'000'000;
inline constexpr TimeNs kSecond = 1'000'000'000;

// What happens to one frame a session sent.
struct Verdict {
  bool drop = false;
  TimeNs extra_delay = 0;
  int copies = 1;  // > 1 duplicates the frame (each copy is delivered)
};

class Interceptor {
 public:
  virtual ~Interceptor() = default;
  virtual Verdict OnSend(PeerId from, PeerId to, std::span<const std::byte> frame, TimeNs now) = 0;
};

class TestNetwork {
 public:
  TestNetwork(ServerSession& server, std::vector<WorkerSession*> workers,
              std::size_t max_frame_bytes, std::size_t capacity = 512)
      : server_(server),
        workers_(std::move(workers)),
        slot_words_((max_frame_bytes + 7) / 8),
        storage_(capacity * slot_words_),
        flights_(capacity),
        latency_(workers_.size() + 1, 0),
        ns_per_sample_(workers_.size() + 1, 0),
        down_(workers_.size() + 1, false) {}

  TimeNs now() const { return now_; }
  std::size_t worker_count() const { return workers_.size(); }
  // One-way latency of every frame to or from `worker`.
  void SetLatency(PeerId worker, TimeNs latency) { latency_.at(worker) = latency; }
  void SetLatencyAll(TimeNs latency) { std::fill(latency_.begin(), latency_.end(), latency); }
  // Compute time a worker's frame is delayed by per sample of work it reports.
  void SetComputeNsPerSample(PeerId worker, TimeNs ns) { ns_per_sample_.at(worker) = ns; }
  // A down worker neither sends nor receives, nor is its timer run (a crashed device).
  void SetWorkerDown(PeerId worker, bool down) { down_.at(worker) = down; }
  bool worker_down(PeerId worker) const { return down_.at(worker); }
  void SetInterceptor(Interceptor* interceptor) { interceptor_ = interceptor; }

  std::uint64_t frames_delivered() const { return delivered_; }
  std::uint64_t frames_dropped() const { return dropped_; }
  std::size_t in_flight() const {
    return static_cast<std::size_t>(
        std::count_if(flights_.begin(), flights_.end(), [](const Flight& f) { return f.used; }));
  }

  void Start() {
    server_.Start(now_);
    DrainServer();
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const auto id = static_cast<PeerId>(i + 1);
      if (down_[id]) continue;
      workers_[i]->Start(now_);
      DrainWorker(id);
    }
  }

  // Starts one worker (e.g. one that was down when the network started).
  void StartWorker(PeerId id) {
    workers_.at(id - 1)->Start(now_);
    DrainWorker(id);
  }

  // Tells worker `id` its link to the server dropped (the driver's OnPeerLost).
  void WorkerLostServer(PeerId id) {
    workers_.at(id - 1)->OnPeerLost(kServerPeer, now_);
    DrainWorker(id);
  }

  // Queues raw bytes as if `from` had sent them to `to`, delivered `delay` from now.
  void Inject(PeerId from, PeerId to, std::span<const std::byte> bytes, TimeNs delay = 0) {
    Enqueue(from, to, bytes, now_ + delay);
  }

  // Delivers raw bytes to `to` right now, bypassing the links (for fuzzing a session directly).
  void DeliverNow(PeerId from, PeerId to, std::span<const std::byte> bytes) {
    Deliver(from, to, bytes);
  }

  // Advances to the next event (a due frame or a wakeup) at or before `limit` and processes
  // everything due then. False when there is none (or the loop looks stuck).
  bool Step(TimeNs limit) {
    TimeNs next = kNever;
    for (const Flight& flight : flights_) {
      if (flight.used) next = std::min(next, flight.at);
    }
    next = std::min(next, server_.NextWakeup());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (!down_[i + 1]) next = std::min(next, workers_[i]->NextWakeup());
    }
    if (next == kNever || next > limit) return false;
    if (next > now_) {
      now_ = next;
      idle_steps_ = 0;
    } else if (++idle_steps_ > 100000) {
      ADD_FAILURE() << "network makes no progress at t=" << now_;
      return false;
    }
    for (;;) {
      Flight* due = nullptr;
      for (Flight& flight : flights_) {
        if (flight.used && flight.at <= now_ &&
            (due == nullptr || flight.at < due->at ||
             (flight.at == due->at && flight.order < due->order))) {
          due = &flight;
        }
      }
      if (due == nullptr) break;
      due->used = false;
      ++delivered_;
      Deliver(due->from, due->to, Bytes(*due));
    }
    if (server_.NextWakeup() <= now_) {
      server_.OnTimer(now_);
      DrainServer();
    }
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const auto id = static_cast<PeerId>(i + 1);
      if (!down_[id] && workers_[i]->NextWakeup() <= now_) {
        workers_[i]->OnTimer(now_);
        DrainWorker(id);
      }
    }
    return true;
  }

  template <typename Done>
  bool RunUntil(Done done, TimeNs limit) {
    while (!done()) {
      if (!Step(limit)) return done();
    }
    return true;
  }

  // Tells the server the link to `worker` is gone (and the worker that its server link is).
  void LoseLink(PeerId worker) {
    server_.OnPeerLost(worker, now_);
    DrainServer();
  }

 private:
  struct Flight {
    bool used = false;
    TimeNs at = 0;
    std::uint64_t order = 0;
    PeerId from = 0;
    PeerId to = 0;
    std::size_t length = 0;
    std::size_t slot = 0;
  };

  std::span<const std::byte> Bytes(const Flight& flight) const {
    return std::as_bytes(std::span<const std::uint64_t>(storage_))
        .subspan(flight.slot * slot_words_ * 8, flight.length);
  }

  void Deliver(PeerId from, PeerId to, std::span<const std::byte> bytes) {
    if (to == kServerPeer) {
      server_.OnFrame(from, bytes, now_);
      DrainServer();
      return;
    }
    if (to > workers_.size() || down_[to]) {
      ++dropped_;
      return;
    }
    workers_[to - 1]->OnFrame(from, bytes, now_);
    DrainWorker(to);
  }

  void DrainServer() {
    OutgoingFrame out;
    while (server_.PollFrame(out)) Send(kServerPeer, out);
  }

  void DrainWorker(PeerId id) {
    OutgoingFrame out;
    while (workers_[id - 1]->PollFrame(out)) Send(id, out);
  }

  void Send(PeerId from, const OutgoingFrame& out) {
    const PeerId worker = from == kServerPeer ? out.to : from;
    if (worker == kServerPeer || worker > workers_.size() || down_[worker]) {
      ++dropped_;
      return;
    }
    Verdict verdict;
    if (interceptor_ != nullptr) verdict = interceptor_->OnSend(from, out.to, out.bytes, now_);
    if (verdict.drop) {
      ++dropped_;
      return;
    }
    const TimeNs at =
        now_ + latency_[worker] + out.work_samples * ns_per_sample_[from] + verdict.extra_delay;
    for (int copy = 0; copy < verdict.copies; ++copy) Enqueue(from, out.to, out.bytes, at);
  }

  void Enqueue(PeerId from, PeerId to, std::span<const std::byte> bytes, TimeNs at) {
    if (bytes.size() > slot_words_ * 8) {
      ADD_FAILURE() << "frame of " << bytes.size() << " bytes exceeds the test network's slots";
      return;
    }
    for (std::size_t i = 0; i < flights_.size(); ++i) {
      Flight& flight = flights_[i];
      if (flight.used) continue;
      flight = Flight{true, at, next_order_++, from, to, bytes.size(), i};
      std::byte* slot =
          std::as_writable_bytes(std::span<std::uint64_t>(storage_)).data() + i * slot_words_ * 8;
      std::copy(bytes.begin(), bytes.end(), slot);
      return;
    }
    ADD_FAILURE() << "test network is full";
  }

  ServerSession& server_;
  std::vector<WorkerSession*> workers_;
  std::size_t slot_words_;
  std::vector<std::uint64_t> storage_;
  std::vector<Flight> flights_;
  std::vector<TimeNs> latency_;
  std::vector<TimeNs> ns_per_sample_;
  std::vector<bool> down_;
  Interceptor* interceptor_ = nullptr;
  TimeNs now_ = 0;
  std::uint64_t next_order_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t dropped_ = 0;
  int idle_steps_ = 0;
};

// ---- The quadratic problem ----

struct QuadraticProblem {
  std::vector<float> target;
  std::uint64_t calls = 0;
  bool fail = false;               // the callback returns an error (a device fault)
  std::vector<float> round_start;  // the point of the latest round's first step
};

inline Status QuadraticGradient(void* user, std::span<const float> point, std::uint32_t,
                                std::uint32_t step, std::span<float> gradient) {
  auto* problem = static_cast<QuadraticProblem*>(user);
  ++problem->calls;
  if (step == 0) problem->round_start.assign(point.begin(), point.end());
  if (problem->fail) return Status::Internal();
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - problem->target[i];
  return Status::Ok();
}

// A worker's options on the quadratic problem: device `id`, QuadraticGradient on `problem`, every
// codec.
inline WorkerOptions QuadraticWorkerOptions(std::uint32_t id, QuadraticProblem& problem) {
  WorkerOptions options;
  options.device_id = id;
  options.gradient = &QuadraticGradient;
  options.user = &problem;
  options.codecs = &AllCodecs();
  return options;
}

// A sign-flip attacker on the quadratic problem: the negated gradient.
inline Status NegatedQuadraticGradient(void* user, std::span<const float> point,
                                       std::uint32_t round, std::uint32_t step,
                                       std::span<float> gradient) {
  EDGESGD_TRY(QuadraticGradient(user, point, round, step, gradient));
  for (float& value : gradient) value = -value;
  return Status::Ok();
}

// Deterministic pseudo-random floats in [-scale, scale) (an LCG: same on every machine).
inline std::vector<float> PseudoRandom(std::size_t count, std::uint32_t seed, float scale) {
  std::vector<float> values(count);
  std::uint32_t state = seed * 2654435761u + 12345u;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = (static_cast<float>(state >> 8) * 0x1.0p-24f * 2.0f - 1.0f) * scale;
  }
  return values;
}

// Owned arena storage of exactly `bytes` usable bytes (heap, in tests only).
struct ArenaStorage {
  explicit ArenaStorage(std::size_t bytes) : words(bytes / 8 + 4), arena(Aligned(words, bytes)) {}
  static std::span<std::byte> Aligned(std::vector<std::uint64_t>& words, std::size_t bytes) {
    std::byte* base = std::as_writable_bytes(std::span(words)).data();
    const auto address = reinterpret_cast<std::uintptr_t>(base);
    const std::size_t skip = (kArenaAlignment - address % kArenaAlignment) % kArenaAlignment;
    return std::span<std::byte>(base + skip, bytes);
  }
  std::vector<std::uint64_t> words;
  Arena arena;
};

// Four workers, and rounds that wait for all four.
inline ServerOptions FourWorkers() {
  ServerOptions options;
  options.workers = 4;
  options.quorum = 4;
  return options;
}

// A server, n workers on the quadratic problem and the network between them.
class Cluster {
 public:
  Cluster(const RunConfig& config, const ServerOptions& options,
          std::vector<std::vector<float>> targets, const std::vector<float>& initial_model,
          WorkerOptions worker_options = {},
          std::function<void(PeerId, WorkerOptions&)> customize = nullptr,
          std::size_t network_capacity = 512)
      : config_(config), server_storage_(ServerSession::ArenaBytes(config, options)) {
    const Status init =
        server_.Init(server_storage_.arena, AllCodecs(), config, options, initial_model);
    EXPECT_TRUE(init.ok()) << init.reason();
    std::vector<WorkerSession*> pointers;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      problems_.push_back(std::make_unique<QuadraticProblem>());
      problems_.back()->target = std::move(targets[i]);
      storages_.push_back(
          std::make_unique<ArenaStorage>(WorkerSession::ArenaBytes(config, options.workers)));
      workers_.push_back(std::make_unique<WorkerSession>());
      WorkerOptions options_i = worker_options;
      options_i.device_id = static_cast<std::uint32_t>(i + 1);
      options_i.gradient = &QuadraticGradient;
      options_i.user = problems_.back().get();
      if (options_i.codecs == nullptr) options_i.codecs = &AllCodecs();
      if (customize) customize(static_cast<PeerId>(i + 1), options_i);
      worker_options_.push_back(options_i);
      const Status worker_init = workers_.back()->Init(storages_.back()->arena, options_i);
      EXPECT_TRUE(worker_init.ok()) << worker_init.reason();
      pointers.push_back(workers_.back().get());
    }
    const std::size_t max_frame = std::max(WorkerReceiveFrameBytes(config, options.workers),
                                           ServerReceiveFrameBytes(config, options.workers)) +
                                  64;
    network_ =
        std::make_unique<TestNetwork>(server_, std::move(pointers), max_frame, network_capacity);
  }

  ServerSession& server() { return server_; }
  WorkerSession& worker(PeerId id) { return *workers_.at(id - 1); }
  QuadraticProblem& problem(PeerId id) { return *problems_.at(id - 1); }
  TestNetwork& net() { return *network_; }
  std::size_t size() const { return workers_.size(); }
  const RunConfig& config() const { return config_; }

  void Start() { network_->Start(); }

  // Worker `id` restarts: a fresh session with the same options, changed by `change` if given
  // (its memory of the run gone), in place of the old one, started at once.
  void RestartWorker(PeerId id, const std::function<void(WorkerOptions&)>& change = nullptr) {
    if (change) change(worker_options_.at(id - 1));
    WorkerSession* worker = workers_.at(id - 1).get();
    worker->~WorkerSession();
    ::new (static_cast<void*>(worker)) WorkerSession();
    storages_.at(id - 1) = std::make_unique<ArenaStorage>(
        WorkerSession::ArenaBytes(config_, static_cast<std::uint32_t>(workers_.size())));
    const Status init = worker->Init(storages_.at(id - 1)->arena, worker_options_.at(id - 1));
    EXPECT_TRUE(init.ok()) << init.reason();
    network_->StartWorker(id);
  }

  bool RunUntilFinished(TimeNs limit) {
    return network_->RunUntil([&] { return server_.Finished() && network_->in_flight() == 0; },
                              limit);
  }
  // Until round `round` is in progress (or the run is over).
  bool RunUntilRound(std::uint32_t round, TimeNs limit) {
    return network_->RunUntil([&] { return server_.round() >= round || server_.Finished(); },
                              limit);
  }
  std::vector<RoundEvent> DrainRounds() {
    std::vector<RoundEvent> events;
    RoundEvent event;
    while (server_.PollRoundEvent(event)) events.push_back(event);
    return events;
  }
  std::vector<RejectEvent> DrainRejects() {
    std::vector<RejectEvent> events;
    RejectEvent event;
    while (server_.PollRejectEvent(event)) events.push_back(event);
    return events;
  }

  // Mean of the workers' targets (the optimum of mean aggregation).
  std::vector<float> MeanTarget() const {
    std::vector<float> mean(config_.layout.dimension(), 0.0f);
    for (const auto& problem : problems_) {
      for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += problem->target[i];
    }
    for (float& value : mean) value /= static_cast<float>(problems_.size());
    return mean;
  }

 private:
  RunConfig config_;
  ArenaStorage server_storage_;
  ServerSession server_;
  std::vector<std::unique_ptr<QuadraticProblem>> problems_;
  std::vector<std::unique_ptr<ArenaStorage>> storages_;
  std::vector<std::unique_ptr<WorkerSession>> workers_;
  std::vector<WorkerOptions> worker_options_;
  std::unique_ptr<TestNetwork> network_;
};

inline float Distance(std::span<const float> a, std::span<const float> b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    sum += diff * diff;
  }
  return static_cast<float>(std::sqrt(sum));
}

// Codec `codec` at its defaults, except that the sparsifiers keep a quarter of each tensor.
inline CodecParams QuarterSparse(CodecId codec) {
  return edgesgd::test_util::EveryCodec(
      {.k_ratio = 0.25f, .block_ratio = 4, .qsgd_levels = 127, .qsgd_bucket = 512})[codec];
}

// A mean-aggregation configuration on one tensor of `dimension` coordinates.
inline RunConfig MeanConfig(std::size_t dimension, CodecId codec, std::uint32_t rounds) {
  RunConfig config;
  config.layout = TensorLayout::Single(dimension).value();
  config.codec = QuarterSparse(codec);
  config.feedback.kind = FeedbackKind::kEf;
  config.feedback.learning_rate = 0.2f;
  config.feedback.momentum = 0.5f;
  config.feedback.weight_decay = 0.0f;
  config.feedback.local_steps = 1;
  config.rounds = rounds;
  config.seed = 42;
  config.batch = 8;
  return config;
}

inline RunConfig MajorityConfig(std::size_t dimension, std::uint32_t rounds) {
  RunConfig config;
  config.layout = TensorLayout::Single(dimension).value();
  config.codec = SignParams{.scale = SignScale::kUnit};
  config.aggregation = AggregationKind::kMajority;
  config.optimizer = OptimizerParams{OptimizerKind::kSignum, 0.01f, 0.5f, 0.0f};
  config.rounds = rounds;
  config.seed = 7;
  return config;
}

// One configuration served by each aggregation component (aggregation_registry.h), with the
// component's name, on one tensor of `dimension` coordinates.
struct ComponentConfig {
  std::string_view component;
  RunConfig config;
};
inline std::vector<ComponentConfig> ConfigPerAggregation(std::size_t dimension,
                                                         std::uint32_t rounds) {
  RunConfig payload_mean = MeanConfig(dimension, kCodecId<RandKCodec>, rounds);
  payload_mean.downlink = DownlinkKind::kAggregate;
  RunConfig recompressed_mean = MeanConfig(dimension, kCodecId<TopKCodec>, rounds);
  recompressed_mean.downlink = DownlinkKind::kAggregate;
  RunConfig robust_mean = MeanConfig(dimension, kCodecId<TopKCodec>, rounds);
  robust_mean.robust = RobustParams{.rule = RobustRule::kTrimmedMean, .byzantine = 1};
  RunConfig scaffold = MeanConfig(dimension, kCodecId<TopKCodec>, rounds);
  scaffold.feedback.local_steps = 2;
  scaffold.scaffold = true;
  RunConfig fednova = MeanConfig(dimension, kCodecId<TopKCodec>, rounds);
  fednova.feedback.local_steps = 2;
  fednova.feedback.momentum = 0.0f;
  fednova.aggregation_options = FedNovaAggregation::kOption.bit;
  return {{"mean", MeanConfig(dimension, kCodecId<TopKCodec>, rounds)},
          {"payload_mean", payload_mean},
          {"recompressed_mean", recompressed_mean},
          {"majority_vote", MajorityConfig(dimension, rounds)},
          {"robust_mean", robust_mean},
          {"scaffold", scaffold},
          {"fednova", fednova}};
}

inline std::vector<std::vector<float>> Targets(std::size_t workers, std::size_t dimension,
                                               float scale = 1.0f) {
  std::vector<std::vector<float>> targets;
  for (std::size_t w = 0; w < workers; ++w) {
    targets.push_back(PseudoRandom(dimension, static_cast<std::uint32_t>(100 + w), scale));
  }
  return targets;
}

// A run of `config` by FourWorkers() on Targets(4, d) from `initial`, 1 ms links: the server's
// checkpoint taken with round `round` in progress, and the model the uninterrupted run ends with.
struct InterruptedRun {
  std::vector<std::byte> checkpoint;
  std::vector<float> final_model;
};
inline InterruptedRun RunWithCheckpointAt(const RunConfig& config,
                                          const std::vector<float>& initial, std::uint32_t round) {
  const std::size_t d = config.layout.dimension();
  InterruptedRun run;
  Cluster cluster(config, FourWorkers(), Targets(4, d), initial);
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilRound(round, 1000 * kSecond));
  run.checkpoint.resize(cluster.server().StateBytes());
  const Result<std::size_t> written = cluster.server().SaveState(run.checkpoint);
  EXPECT_TRUE(written.ok() && written.value() == run.checkpoint.size());
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  run.final_model.assign(cluster.server().model().begin(), cluster.server().model().end());
  return run;
}

// The same run resumed from `checkpoint` by a fresh server and fresh workers: the model it ends
// with (empty if the checkpoint is refused).
inline std::vector<float> ResumeToEnd(const RunConfig& config, const std::vector<float>& initial,
                                      std::span<const std::byte> checkpoint) {
  const std::size_t d = config.layout.dimension();
  Cluster resumed(config, FourWorkers(), Targets(4, d), initial);
  const Status restored = resumed.server().RestoreState(checkpoint);
  EXPECT_TRUE(restored.ok()) << restored.reason();
  if (!restored.ok()) return {};
  resumed.net().SetLatencyAll(kMs);
  resumed.Start();
  EXPECT_TRUE(resumed.RunUntilFinished(1000 * kSecond));
  return {resumed.server().model().begin(), resumed.server().model().end()};
}

}  // namespace edgesgd::protocol::testing
