// tcp::Server, tcp::Worker and tcp::Peer as an application embeds them: on one io_context the
// test owns, over loopback, training the quadratic problem of the protocol tests (gradient
// x - target_i). Checks the round callbacks, the final model against its closed form, that the
// library leaves the process's signals alone unless asked, that an idle server leaves the loop
// idle, checkpoints and resume, and a refused Welcome.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "edgesgd/protocol/topology.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/peer.h"
#include "edgesgd/tcp/server.h"
#include "edgesgd/tcp/worker.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::tcp {
namespace {

using protocol::testing::QuadraticGradient;
using protocol::testing::QuadraticProblem;

constexpr std::size_t kDim = 16;
constexpr float kLearningRate = 0.3f;

// Plain SGD over the identity codec: every round x <- x - lr * mean_i (x - target_i), so after
// r rounds with every worker reporting, x = mean + (1 - lr)^r (x0 - mean).
protocol::RunConfig DenseSgdConfig(std::uint32_t rounds) {
  protocol::RunConfig config = protocol::testing::MeanConfig(kDim, kCodecId<IdentityCodec>, rounds);
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.learning_rate = kLearningRate;
  config.feedback.momentum = 0.0f;
  return config;
}

ServerSettings LoopbackServer(std::uint32_t workers, std::uint32_t rounds,
                              std::span<const float> initial) {
  ServerSettings settings;
  settings.run = DenseSgdConfig(rounds);
  settings.server.workers = workers;
  settings.server.quorum = workers;
  settings.initial_model.assign(initial.begin(), initial.end());
  settings.listen = Endpoint{"127.0.0.1", 0};
  settings.network.log_name = "test server";
  return settings;
}

// A worker of the quadratic problem for the server on `port`.
WorkerSettings LoopbackWorker(std::uint32_t id, std::uint16_t port, QuadraticProblem& problem) {
  WorkerSettings settings;
  settings.server = Endpoint{"127.0.0.1", port};
  settings.worker.device_id = id;
  settings.worker.gradient = &QuadraticGradient;
  settings.worker.user = &problem;
  settings.memory_bytes = std::size_t{1} << 20;
  settings.network.log_name = "test worker";
  settings.network.give_up_ns = 10'000 * kNsPerMs;  // a failed test ends instead of hanging
  return settings;
}

std::vector<float> MeanOf(const std::vector<std::vector<float>>& vectors) {
  std::vector<float> mean(vectors.front().size(), 0.0f);
  for (const auto& vector : vectors) {
    for (std::size_t i = 0; i < mean.size(); ++i) {
      mean[i] += vector[i] / static_cast<float>(vectors.size());
    }
  }
  return mean;
}

bool HandlerInstalled(int signal_number) {
  struct sigaction action {};
  sigaction(signal_number, nullptr, &action);
  return action.sa_handler != SIG_DFL;
}

TEST(TcpLibraryTest, ServerAndTwoWorkersShareTheCallersLoop) {
  constexpr std::uint32_t kRounds = 12;
  const std::vector<float> initial(kDim, 2.0f);
  const std::vector<std::vector<float>> targets = protocol::testing::Targets(2, kDim);
  asio::io_context io;
  Server server(io);
  const HostResult<> opened = server.Open(LoopbackServer(2, kRounds, initial));
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::vector<std::uint32_t> rounds_seen;
  std::vector<float> last_model;
  server.OnRound([&](const protocol::RoundEvent& round, std::span<const float> model) {
    rounds_seen.push_back(round.round);
    EXPECT_EQ(round.reported, 2u);
    last_model.assign(model.begin(), model.end());
  });
  std::optional<DriverStop> server_stop;
  server.Start([&](DriverStop stop) { server_stop = stop; });

  std::vector<QuadraticProblem> problems(2);
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::optional<DriverStop>> worker_stops(2);
  std::uint32_t welcomes = 0;
  for (std::uint32_t w = 0; w < 2; ++w) {
    problems[w].target = targets[w];
    WorkerSettings settings = LoopbackWorker(w + 1, server.listen_port(), problems[w]);
    settings.on_welcome = [&welcomes, kRounds](const protocol::RunConfig& config,
                                               std::uint32_t count) {
      ++welcomes;
      EXPECT_EQ(config.rounds, kRounds);
      EXPECT_EQ(count, 2u);
      return Status::Ok();
    };
    workers.push_back(std::make_unique<Worker>(io));
    const HostResult<> worker_opened = workers.back()->Open(settings);
    ASSERT_TRUE(worker_opened.ok()) << worker_opened.message();
    workers.back()->Start([&worker_stops, w](DriverStop stop) { worker_stops[w] = stop; });
  }
  io.run();  // returns once the three have nothing pending: each completed and let go

  ASSERT_EQ(server_stop, DriverStop::kFinished);
  for (const auto& stop : worker_stops) EXPECT_EQ(stop, DriverStop::kFinished);
  EXPECT_EQ(welcomes, 2u);
  ASSERT_EQ(rounds_seen.size(), kRounds);
  for (std::uint32_t r = 0; r < kRounds; ++r) EXPECT_EQ(rounds_seen[r], r);
  EXPECT_TRUE(server.status().ok());
  const std::span<const float> model = server.session().model();
  ASSERT_EQ(std::vector<float>(model.begin(), model.end()), last_model);
  const std::vector<float> mean = MeanOf(targets);
  const double shrink = std::pow(1.0 - static_cast<double>(kLearningRate), kRounds);
  for (std::size_t i = 0; i < kDim; ++i) {
    const double start = static_cast<double>(initial[i]) - static_cast<double>(mean[i]);
    const double expected = static_cast<double>(mean[i]) + shrink * start;
    EXPECT_NEAR(model[i], expected, 1e-4) << "coordinate " << i;
  }
  for (const auto& worker : workers) {
    EXPECT_TRUE(worker->status().ok());
    EXPECT_EQ(worker->session().counters().updates_sent, kRounds);
    EXPECT_EQ(worker->network_counters().connected, 1u);
  }
  EXPECT_EQ(server.network_counters().accepted, 2u);
}

TEST(TcpLibraryTest, LibraryLeavesSignalsAloneUnlessAsked) {
  ASSERT_FALSE(HandlerInstalled(SIGINT));
  ASSERT_FALSE(HandlerInstalled(SIGTERM));
  const std::vector<float> initial(kDim, 0.0f);
  for (const bool asked : {false, true}) {
    asio::io_context io;
    Server server(io);
    ServerSettings settings = LoopbackServer(1, 1, initial);
    settings.network.handle_signals = asked;
    const HostResult<> opened = server.Open(settings);
    ASSERT_TRUE(opened.ok()) << opened.message();
    std::optional<DriverStop> stop;
    server.Start([&stop](DriverStop reason) { stop = reason; });
    io.poll();
    EXPECT_EQ(HandlerInstalled(SIGINT), asked);
    EXPECT_EQ(HandlerInstalled(SIGTERM), asked);
    server.Stop();
    io.run();
    EXPECT_EQ(stop, DriverStop::kStopped);
    // Once done, the process handles its signals as before.
    EXPECT_FALSE(HandlerInstalled(SIGINT));
    EXPECT_FALSE(HandlerInstalled(SIGTERM));
  }
}

TEST(TcpLibraryTest, IdleServerLeavesTheLoopIdleBesideTheCallersWork) {
  const std::vector<float> initial(kDim, 0.0f);
  asio::io_context io;
  Server server(io);
  const HostResult<> opened = server.Open(LoopbackServer(1, 1, initial));
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::optional<DriverStop> stop;
  server.Start([&stop](DriverStop reason) { stop = reason; });
  // The caller's own work on the same loop: a timer that ends the server after 300 ms.
  asio::steady_timer timer(io, std::chrono::milliseconds(300));
  bool timer_fired = false;
  timer.async_wait([&](const asio::error_code& error) {
    timer_fired = !error;
    server.Stop();
  });
  // Nobody joins: the server waits for its worker without waking the loop (a 20 ms poll would
  // run about 15 handlers here).
  const std::size_t handlers = io.run_for(std::chrono::milliseconds(250));
  EXPECT_LE(handlers, 2u);
  io.run();
  EXPECT_TRUE(timer_fired);
  EXPECT_EQ(stop, DriverStop::kStopped);
  EXPECT_EQ(server.session().phase(), protocol::ServerPhase::kJoining);
}

TEST(TcpLibraryTest, CheckpointedRunResumesWhereItStopped) {
  constexpr std::uint32_t kRounds = 8;
  constexpr std::uint32_t kStopAfter = 3;
  const std::filesystem::path checkpoint =
      std::filesystem::path(::testing::TempDir()) / "tcp_library_test.ckpt";
  std::filesystem::remove(checkpoint);
  const std::vector<float> initial(kDim, 1.0f);
  QuadraticProblem problem;
  problem.target = protocol::testing::Targets(1, kDim).front();
  ServerSettings settings = LoopbackServer(1, kRounds, initial);
  settings.checkpoint = checkpoint.string();
  std::vector<std::uint32_t> rounds_seen;
  // A run that stops itself after kStopAfter rounds, then one that resumes from its checkpoint.
  for (const bool resume : {false, true}) {
    settings.resume = resume;
    asio::io_context io;
    Server server(io);
    const HostResult<> opened = server.Open(settings);
    ASSERT_TRUE(opened.ok()) << opened.message();
    EXPECT_EQ(server.session().round(), resume ? kStopAfter : 0u);
    Worker worker(io);
    const HostResult<> worker_opened =
        worker.Open(LoopbackWorker(1, server.listen_port(), problem));
    ASSERT_TRUE(worker_opened.ok()) << worker_opened.message();
    server.OnRound([&](const protocol::RoundEvent& round, std::span<const float>) {
      rounds_seen.push_back(round.round);
      if (!resume && round.round + 1 == kStopAfter) server.Stop();
    });
    std::optional<DriverStop> stop;
    server.Start([&](DriverStop reason) {
      stop = reason;
      worker.Stop();  // a server stopped without a Leave: its worker would keep reconnecting
    });
    worker.Start([](DriverStop) {});
    io.run();
    EXPECT_EQ(stop, resume ? DriverStop::kFinished : DriverStop::kStopped);
    EXPECT_TRUE(server.status().ok()) << server.status().message();
    EXPECT_TRUE(std::filesystem::exists(checkpoint));
  }
  ASSERT_EQ(rounds_seen.size(), kRounds);
  for (std::uint32_t r = 0; r < kRounds; ++r) EXPECT_EQ(rounds_seen[r], r);
}

TEST(TcpLibraryTest, WorkerThatRefusesTheRunStopsBeforeAnyGradient) {
  const std::vector<float> initial(kDim, 0.0f);
  asio::io_context io;
  Server server(io);
  const HostResult<> opened = server.Open(LoopbackServer(1, 5, initial));
  ASSERT_TRUE(opened.ok()) << opened.message();
  Worker worker(io);
  QuadraticProblem problem;
  problem.target.assign(kDim, 1.0f);
  WorkerSettings settings = LoopbackWorker(1, server.listen_port(), problem);
  settings.on_welcome = [](const protocol::RunConfig&, std::uint32_t) {
    return Status::FailedPrecondition("no data for this run");
  };
  const HostResult<> worker_opened = worker.Open(settings);
  ASSERT_TRUE(worker_opened.ok()) << worker_opened.message();
  std::optional<DriverStop> worker_stop;
  worker.Start([&](DriverStop stop) {
    worker_stop = stop;
    server.Stop();
  });
  server.Start([](DriverStop) {});
  io.run();
  EXPECT_EQ(worker_stop, DriverStop::kStopped);
  EXPECT_EQ(worker.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_STREQ(worker.status().reason(), "no data for this run");
  EXPECT_EQ(problem.calls, 0u);
}

// A port nobody listens on right now (peers must know each other's ports before they open).
std::uint16_t FreePort(asio::io_context& io) {
  asio::ip::tcp::acceptor acceptor(io);
  asio::error_code error;
  acceptor.open(asio::ip::tcp::v4(), error);
  acceptor.bind(asio::ip::tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0), error);
  EXPECT_FALSE(error) << error.message();
  return acceptor.local_endpoint(error).port();
}

// A worker that never reached its server says so in status(), not only in Run's value.
TEST(TcpLibraryTest, WorkerStatusSaysItGaveUpWithoutAServer) {
  asio::io_context io;
  const std::uint16_t port = FreePort(io);
  QuadraticProblem problem;
  problem.target.assign(kDim, 1.0f);
  WorkerSettings settings = LoopbackWorker(1, port, problem);
  settings.network.give_up_ns = 300 * kNsPerMs;
  Worker worker;
  const HostResult<> worker_opened = worker.Open(settings);
  ASSERT_TRUE(worker_opened.ok()) << worker_opened.message();
  EXPECT_TRUE(worker.status().ok());
  EXPECT_FALSE(worker.stop().has_value());
  EXPECT_EQ(worker.Run(), DriverStop::kGaveUp);
  EXPECT_EQ(worker.stop(), DriverStop::kGaveUp);
  EXPECT_EQ(worker.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(std::string(worker.status().reason()).find("gave up"), std::string::npos);
  EXPECT_EQ(problem.calls, 0u);
}

TEST(TcpLibraryTest, GossipPeersOnOneLoopAgreeOnTheMeanTarget) {
  constexpr std::uint32_t kPeers = 3;
  constexpr std::uint32_t kRounds = 40;
  const protocol::Topology ring{protocol::TopologyKind::kRing, kPeers};
  const std::vector<std::vector<float>> targets = protocol::testing::Targets(kPeers, kDim);
  const std::vector<float> initial(kDim, 0.0f);
  asio::io_context io;
  std::vector<DialTarget> addresses;
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    addresses.push_back({i + 1, Endpoint{"127.0.0.1", FreePort(io)}});
  }
  std::vector<QuadraticProblem> problems(kPeers);
  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<std::uint32_t> rounds_seen(kPeers, 0);
  std::vector<std::optional<DriverStop>> stops(kPeers);
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    problems[i].target = targets[i];
    PeerSettings settings;
    settings.config.mixing =
        protocol::MakeMixingRow(ring, protocol::MixingRule::kMetropolisHastings, i + 1).value();
    settings.config.layout = TensorLayout::Single(kDim).value();
    settings.config.rounds = kRounds;
    settings.config.learning_rate = 0.1f;
    settings.config.neighbour_deadline_ns = 5'000 * kNsPerMs;
    settings.gossip.gradient = &QuadraticGradient;
    settings.gossip.user = &problems[i];
    settings.gossip.initial_model = initial;
    settings.listen = addresses[i].endpoint;
    settings.neighbours = addresses;
    settings.network.max_peer_id = kPeers;
    settings.network.log_name = "test peer";
    peers.push_back(std::make_unique<Peer>(io));
    const HostResult<> opened = peers.back()->Open(settings);
    ASSERT_TRUE(opened.ok()) << opened.message();
    peers.back()->OnRound(
        [&rounds_seen, i](const protocol::GossipRoundEvent& round, std::span<const float> model) {
          EXPECT_EQ(round.round, rounds_seen[i]++);
          EXPECT_EQ(model.size(), kDim);
        });
  }
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    peers[i]->Start([&stops, i](DriverStop stop) { stops[i] = stop; });
  }
  io.run();
  const std::vector<float> mean = MeanOf(targets);
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    EXPECT_EQ(stops[i], DriverStop::kFinished) << "peer " << i + 1;
    EXPECT_EQ(rounds_seen[i], kRounds) << "peer " << i + 1;
    const protocol::GossipPeerSession& session = peers[i]->session();
    EXPECT_TRUE(session.Finished());
    EXPECT_EQ(session.counters().neighbours_missed, 0u);
    // Constant-step D-PSGD settles near, not at, the optimum: within a few lr of it.
    EXPECT_LT(protocol::testing::Distance(session.model(), mean), 0.5f) << "peer " << i + 1;
  }
}

}  // namespace
}  // namespace edgesgd::tcp
