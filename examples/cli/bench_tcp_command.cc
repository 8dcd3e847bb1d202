// `edgesgd bench tcp`: rounds per second and goodput of the parameter-server protocol over
// loopback TCP, one process (server and workers each on their own thread and SessionDriver),
// for a dense, a 1-bit and a sparse uplink. Workers compute a synthetic gradient (x - target,
// one pass over d floats) so the figures are those of codecs, protocol and sockets.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/tcp_flags.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/tcp/loopback.h"

namespace edgesgd::cli {
namespace {

struct BenchTcpOptions {
  std::size_t dimension = 1'000'000;
  std::uint32_t workers = 8;
  std::uint32_t rounds = 30;
  std::uint32_t warmup = 3;
  float k_ratio = 0.01f;
  std::vector<std::string> uplinks;  // keys of the variants to run; empty runs them all
  std::size_t socket_send_buffer = 0;
  std::size_t receive_low_watermark = tcp::kDefaultReceiveLowWatermarkBytes;
  bool json = false;
};

struct Variant {
  const char* key;  // what --uplink names it by
  const char* name;
  protocol::RunConfig config;
};

constexpr const char* kUplinkKeys[] = {"dense", "sign", "top_k", "top_k_both"};

std::vector<Variant> Variants(const BenchTcpOptions& o) {
  protocol::RunConfig base;
  base.layout = TensorLayout::Single(o.dimension).value();
  base.rounds = o.warmup + o.rounds;
  base.seed = 1;
  base.batch = 1;
  base.feedback.kind = FeedbackKind::kEf;
  base.feedback.learning_rate = 0.01f;
  base.feedback.momentum = 0.0f;
  std::vector<Variant> variants;
  protocol::RunConfig dense = base;
  dense.codec = IdentityParams{};
  dense.feedback.kind = FeedbackKind::kNone;
  variants.push_back({kUplinkKeys[0], "dense (identity, model downlink)", dense});
  protocol::RunConfig sign = base;
  sign.codec = SignParams{SignScale::kUnit};
  sign.aggregation = protocol::AggregationKind::kMajority;
  sign.optimizer = {OptimizerKind::kSignum, 1e-3f, 0.9f, 0.0f};
  sign.downlink = protocol::DownlinkKind::kAggregate;
  variants.push_back({kUplinkKeys[1], "sign + majority (1-bit up and down)", sign});
  protocol::RunConfig top_k = base;
  top_k.codec = TopKParams{o.k_ratio};
  variants.push_back({kUplinkKeys[2], "top_k + EF (model downlink)", top_k});
  protocol::RunConfig two_way = top_k;
  two_way.downlink = protocol::DownlinkKind::kAggregate;
  variants.push_back({kUplinkKeys[3], "top_k + EF (top_k downlink, server EF)", two_way});
  return variants;
}

// The synthetic gradient: x - target, target fixed per worker.
struct SyntheticGradient {
  std::vector<float> target;
  static Status Compute(void* user, std::span<const float> point, std::uint32_t, std::uint32_t,
                        std::span<float> gradient) {
    const std::vector<float>& target = static_cast<SyntheticGradient*>(user)->target;
    for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - target[i];
    return Status::Ok();
  }
};

struct ArenaStorage {
  explicit ArenaStorage(std::size_t bytes)
      : storage(new std::byte[bytes + kArenaAlignment]),
        arena(std::span<std::byte>(storage.get(), bytes + kArenaAlignment)) {}
  std::unique_ptr<std::byte[]> storage;
  Arena arena;
};

struct TcpFigures {
  double rounds_per_second = 0;
  double wire_mb_per_second = 0;      // frame bytes up + down
  double effective_mb_per_second = 0;  // dense-equivalent: 4d bytes per worker each way
  double up_bytes_per_round = 0;
  double down_bytes_per_round = 0;
};

HostResult<TcpFigures> Measure(const BenchTcpOptions& o, const protocol::RunConfig& config) {
  protocol::ServerOptions options;
  options.workers = o.workers;
  options.quorum = o.workers;
  ArenaStorage server_storage(protocol::ServerSession::ArenaBytes(config, options));
  protocol::ServerSession server;
  const std::vector<float> initial(o.dimension, 0.0f);
  if (const Status check =
          server.Init(server_storage.arena, AllCodecs(), config, options, initial);
      !check.ok()) {
    return HostError(check);
  }
  std::vector<std::unique_ptr<SyntheticGradient>> gradients;
  std::vector<std::unique_ptr<ArenaStorage>> storages;
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers;
  std::vector<protocol::WorkerSession*> pointers;
  for (std::uint32_t w = 0; w < o.workers; ++w) {
    gradients.push_back(std::make_unique<SyntheticGradient>());
    gradients.back()->target.resize(o.dimension);
    CounterRng rng(config.seed, w, 0, 0);
    for (float& value : gradients.back()->target) value = rng.NextFloat() - 0.5f;
    storages.push_back(std::make_unique<ArenaStorage>(protocol::WorkerSession::ArenaBytes(config)));
    workers.push_back(std::make_unique<protocol::WorkerSession>());
    protocol::WorkerOptions worker_options;
    worker_options.device_id = w + 1;
    worker_options.gradient = &SyntheticGradient::Compute;
    worker_options.codecs = &AllCodecs();
    worker_options.user = gradients.back().get();
    if (const Status check = workers.back()->Init(storages.back()->arena,
                                                                 worker_options);
        !check.ok()) {
      return HostError(check);
    }
    pointers.push_back(workers.back().get());
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point start, end;
  std::uint64_t bytes_at_start = 0, up_at_start = 0, down_at_start = 0;
  std::uint64_t up_at_end = 0, down_at_end = 0;
  bool started = false, ended = false;
  const auto hook = [&] {
    protocol::RoundEvent event;
    while (server.PollRoundEvent(event)) {
      if (event.round + 1 == o.warmup && !started) {
        start = Clock::now();
        up_at_start = event.bytes_up;
        down_at_start = event.bytes_down;
        bytes_at_start = up_at_start + down_at_start;
        started = true;
      }
      if (event.round + 1 == o.warmup + o.rounds && !ended) {
        end = Clock::now();
        up_at_end = event.bytes_up;
        down_at_end = event.bytes_down;
        ended = true;
      }
    }
  };
  const HostResult<tcp::LoopbackResult> ran =
      tcp::RunOnLoopback(server, pointers, hook,
                         {.socket_send_buffer_bytes = o.socket_send_buffer,
                          .receive_low_watermark_bytes = o.receive_low_watermark});
  if (!ran.ok()) return ran.error();
  if (!started || !ended || !server.Finished()) {
    return HostError(Status::Internal(), "the run did not complete");
  }
  TcpFigures figures;
  const double seconds = std::chrono::duration<double>(end - start).count();
  const double bytes = static_cast<double>(up_at_end + down_at_end - bytes_at_start);
  figures.rounds_per_second = o.rounds / seconds;
  figures.wire_mb_per_second = bytes / seconds / 1e6;
  figures.effective_mb_per_second =
      2.0 * 4.0 * static_cast<double>(o.dimension) * o.workers * o.rounds / seconds / 1e6;
  figures.up_bytes_per_round = static_cast<double>(up_at_end - up_at_start) / o.rounds;
  figures.down_bytes_per_round = static_cast<double>(down_at_end - down_at_start) / o.rounds;
  return figures;
}

int RunBenchTcp(const BenchTcpOptions& o) {
  // Connection notices would interleave with the table.
  platform::SetLogLevel(platform::LogLevel::kError);
  if (!o.json) {
    std::printf("edgesgd bench tcp: d = %zu, %u workers on loopback, %u rounds after %u warm-up, "
                "socket send buffer %s, receive low watermark %zu B\n",
                o.dimension, o.workers, o.rounds, o.warmup,
                o.socket_send_buffer == 0 ? "auto-tuned"
                                          : (std::to_string(o.socket_send_buffer) + " B").c_str(),
                o.receive_low_watermark);
    std::printf("%-38s %10s %14s %14s %14s %14s\n", "uplink", "rounds/s", "up B/round",
                "down B/round", "wire MB/s", "effective MB/s");
  } else {
    std::printf("{\"dimension\": %zu, \"workers\": %u, \"rounds\": %u, "
                "\"socket_send_buffer\": %zu, \"receive_low_watermark\": %zu, \"variants\": [",
                o.dimension, o.workers, o.rounds, o.socket_send_buffer, o.receive_low_watermark);
  }
  bool first = true;
  for (const Variant& variant : Variants(o)) {
    if (!o.uplinks.empty() &&
        std::find(o.uplinks.begin(), o.uplinks.end(), variant.key) == o.uplinks.end()) {
      continue;
    }
    const HostResult<TcpFigures> measured = Measure(o, variant.config);
    if (!measured.ok()) {
      std::fprintf(stderr, "edgesgd bench tcp: %s: %s\n", variant.name, measured.message().c_str());
      return 1;
    }
    const TcpFigures& figures = *measured;
    if (o.json) {
      std::printf("%s{\"uplink\": \"%s\", \"rounds_per_second\": %.3f, \"up_bytes_per_round\": %.0f, "
                  "\"down_bytes_per_round\": %.0f, \"wire_mb_per_second\": %.2f, "
                  "\"effective_mb_per_second\": %.2f}",
                  first ? "" : ", ", variant.name, figures.rounds_per_second,
                  figures.up_bytes_per_round, figures.down_bytes_per_round,
                  figures.wire_mb_per_second, figures.effective_mb_per_second);
    } else {
      std::printf("%-38s %10.2f %14.0f %14.0f %14.1f %14.1f\n", variant.name,
                  figures.rounds_per_second, figures.up_bytes_per_round,
                  figures.down_bytes_per_round, figures.wire_mb_per_second,
                  figures.effective_mb_per_second);
    }
    std::fflush(stdout);
    first = false;
  }
  if (o.json) std::printf("]}\n");
  return 0;
}

}  // namespace

void AddBenchTcpCommand(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<BenchTcpOptions>();
  CLI::App* command = bench.add_subcommand(
      "tcp",
      "Rounds per second and goodput of server + workers over loopback TCP (one process, a "
      "thread per participant) for dense, sign + majority vote, and top_k + EF uplinks. "
      "Effective MB/s counts every round as 4d bytes up and down per worker (what a dense run "
      "would move).");
  AddConfigFlag(*command);
  AddBoundedOption(*command, "--dim", o->dimension, std::size_t{1}, std::size_t{100'000'000},
                   "Model dimension d");
  AddBoundedOption(*command, "--workers", o->workers, 1u, protocol::kMaxWorkers, "Worker threads");
  AddBoundedOption(*command, "--rounds", o->rounds, 1u, 1'000'000u, "Measured rounds");
  AddBoundedOption(*command, "--warmup", o->warmup, 1u, 1'000'000u, "Rounds before measuring");
  AddBoundedOption(*command, "--k-ratio", o->k_ratio, 1e-9f, 1.0f,
                   "top_k: fraction of coordinates sent");
  command->add_option("--uplink", o->uplinks,
                      "Run only these variants (repeat the flag or separate with commas): dense, "
                      "sign (+ majority vote), top_k (+ EF, model downlink), top_k_both (top_k "
                      "downlink with server EF); all by default")
      ->delimiter(',')
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kUplinkKeys),
                                                     std::end(kUplinkKeys))));
  AddSocketFlags(*command, o->socket_send_buffer, o->receive_low_watermark);
  command->add_flag("--json", o->json, "Print one JSON object instead of a table");
  command->callback([o, &exit_code] { exit_code = RunBenchTcp(*o); });
}

}  // namespace edgesgd::cli
