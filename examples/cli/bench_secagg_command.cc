// `edgesgd bench secagg`: what secure aggregation costs per round, for cohorts of several sizes,
// with every device masking with every other (SecAgg) and with O(log n) ring neighbours
// (SecAgg+). All devices and the server run in this process, phase by phase, over the library's
// state machines (edgesgd::secagg), so the figures are the protocol's own: the bytes of each
// message's fields (ids, keys, sealed shares, revealed shares) and the CPU time of each side.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/platform/clock.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/server.h"

namespace edgesgd::cli {
namespace {

struct BenchSecAggOptions {
  std::vector<std::uint32_t> devices{8, 32, 100};
  // The MLP with 256 hidden units on Fashion-MNIST has 203,530 parameters; random_block 1/64
  // sends ceil(203,530 / 64) values.
  std::uint32_t words = 3181;
  double dropout = 0.0;
  std::uint32_t sparse_neighbours = 0;  // 0: 2 ceil(log2 n) for each cohort
  int repeats = 3;
  bool json = false;
};

// Field bytes of each message, as they travel.
constexpr std::size_t kIdBytes = 4;
constexpr std::size_t kAdvertisementBytes = 2 * secagg::kKeyBytes;
constexpr std::size_t kRosterEntryBytes = 2 * kIdBytes + 2 * secagg::kKeyBytes;
constexpr std::size_t kSealedEntryBytes = kIdBytes + secagg::kSealedSharesBytes;
constexpr std::size_t kRevealedBytes = kIdBytes + 1 + secagg::kShareBytes;

struct Figures {
  std::uint32_t devices = 0;
  std::uint32_t neighbours = 0;
  std::uint32_t threshold = 0;
  std::uint32_t dropped = 0;
  // Totals over the cohort: the payload over the devices whose input arrived, the protocol's
  // bytes over every device.
  std::size_t payload_bytes = 0;
  std::size_t protocol_up_bytes = 0;
  std::size_t protocol_down_bytes = 0;
  double device_seconds = 0;  // all devices, all phases
  double server_seconds = 0;  // per round
  bool exact = false;
  bool aborted = false;
};

// The SecAgg+ neighbourhood for a cohort of n: `chosen`, or 2 ceil(log2 n); 0 (everyone) when
// that reaches n - 1.
std::uint32_t SparseNeighbours(std::uint32_t n, std::uint32_t chosen) {
  const auto k = chosen != 0
                     ? chosen
                     : static_cast<std::uint32_t>(2 * std::ceil(std::log2(static_cast<double>(n))));
  return k >= n - 1 ? 0 : k;
}

// t = ceil(2 (k + 1) / 3): a third of every neighbourhood may drop out; always more than half.
std::uint32_t Threshold(std::uint32_t holders) {
  return std::max(holders / 2 + 1, (2 * holders + 2) / 3);
}

double PerDevice(std::size_t total, std::uint32_t devices) {
  return static_cast<double>(total) / devices;
}
double PayloadPerDevice(const Figures& f) {
  return PerDevice(f.payload_bytes, f.devices - f.dropped);
}

// Runs `call`, adds its wall time to `seconds` and returns what it returned.
template <typename Call>
auto Timed(double& seconds, Call&& call) {
  const std::uint64_t start = platform::MonotonicNanos();
  auto result = call();
  seconds += static_cast<double>(platform::MonotonicNanos() - start) * 1e-9;
  return result;
}

// A round the server aborted for lack of shares becomes a figure; anything else is an error.
Status Aborted(const secagg::Server& server, Status status, Figures& f) {
  if (server.phase() != secagg::Server::Phase::kAborted ||
      status.code() != StatusCode::kUnavailable) {
    return status;
  }
  f.aborted = true;
  return Status::Ok();
}

// One round. A round the server aborts (too many drop-outs in one neighbourhood) is a figure,
// not an error: `aborted` says so. Any other failure is returned.
Status RunRound(std::uint32_t n, std::uint32_t neighbours, const BenchSecAggOptions& o,
                std::uint64_t round, Figures& f) {
  const std::uint32_t degree = secagg::NeighbourhoodSize(n, neighbours);
  const std::uint32_t threshold = Threshold(degree + 1);
  const auto dropped = static_cast<std::uint32_t>(std::floor(o.dropout * n));
  f = Figures{n, degree, threshold, dropped};
  // One arena for the server and every client (the bench plays all of them).
  const secagg::ServerLimits server_limits{n, degree, o.words};
  const secagg::ClientLimits client_limits{degree, std::min(degree, threshold)};
  std::vector<std::byte> storage(secagg::Server::ArenaBytes(server_limits) +
                                 n * secagg::Client::ArenaBytes(client_limits) +
                                 kArenaAlignment);
  Arena arena(storage);
  secagg::Server server;
  std::vector<secagg::Client> clients(n);
  std::vector<std::uint32_t> ids(n);
  std::vector<std::vector<std::uint32_t>> inputs(n, std::vector<std::uint32_t>(o.words));
  for (std::uint32_t i = 0; i < n; ++i) {
    ids[i] = i + 1;
    for (std::uint32_t w = 0; w < o.words; ++w) inputs[i][w] = i * 2654435761u + w;
    EDGESGD_TRY(clients[i].Init(arena, client_limits));
  }
  EDGESGD_TRY(server.Init(arena, server_limits));
  const secagg::RoundPlan plan{round, threshold, neighbours, round * 7919 + n, o.words};
  // Each call runs on one side's clock.
  const auto on_server = [&f](auto&& call) { return Timed(f.server_seconds, call); };
  const auto on_device = [&f](auto&& call) { return Timed(f.device_seconds, call); };
  EDGESGD_TRY(on_server([&] { return server.Start(plan, ids); }));

  for (std::uint32_t i = 0; i < n; ++i) {
    secagg::KeyAdvertisement keys;
    secagg::Key entropy{};
    entropy[0] = static_cast<std::byte>(i);
    entropy[1] = static_cast<std::byte>(i >> 8);
    entropy[2] = static_cast<std::byte>(round);
    EDGESGD_TRY(on_device([&] { return clients[i].Start(round, ids[i], entropy, keys); }));
    EDGESGD_TRY(on_server([&] { return server.AddKeys(ids[i], keys); }));
    f.protocol_up_bytes += kAdvertisementBytes;
  }
  EDGESGD_TRY(on_server([&] { return server.CloseKeys(); }));

  std::vector<secagg::RosterEntry> roster(degree);
  std::vector<secagg::SealedShares> sealed(degree);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t point = 0;
    EDGESGD_TRY_ASSIGN(const std::size_t count,
                       on_server([&] { return server.RosterFor(ids[i], point, roster); }));
    f.protocol_down_bytes += 2 * kIdBytes + count * kRosterEntryBytes;
    secagg::Digest commitment;
    EDGESGD_TRY_ASSIGN(
        const std::size_t written, on_device([&] {
          return clients[i].ShareKeys(threshold, point, {roster.data(), count}, commitment, sealed);
        }));
    f.protocol_up_bytes += commitment.size() + written * kSealedEntryBytes;
    EDGESGD_TRY(on_server([&] {
      return server.AddShares(ids[i], commitment, {sealed.data(), written});
    }));
  }
  EDGESGD_TRY(on_server([&] { return server.CloseShares(); }));

  // Devices 0..dropped-1 vanish after sharing their keys: the costliest drop-out to recover.
  for (std::uint32_t i = dropped; i < n; ++i) {
    EDGESGD_TRY_ASSIGN(const std::size_t count,
                       on_server([&] { return server.SharesFor(ids[i], sealed); }));
    f.protocol_down_bytes += count * kSealedEntryBytes;
    std::vector<std::uint32_t> masked = inputs[i];
    EDGESGD_TRY(on_device([&] {
      const Status received = clients[i].ReceiveShares({sealed.data(), count});
      return received.ok() ? clients[i].MaskInput(masked) : received;
    }));
    f.payload_bytes += std::size_t{4} * o.words;
    EDGESGD_TRY(on_server([&] { return server.AddMaskedInput(ids[i], masked); }));
  }
  if (Status closed = on_server([&] { return server.CloseInputs(); }); !closed.ok()) {
    return Aborted(server, closed, f);
  }

  std::vector<std::uint32_t> survivors(degree);
  std::vector<secagg::RevealedShare> revealed(degree + 1);
  for (std::uint32_t i = dropped; i < n; ++i) {
    EDGESGD_TRY_ASSIGN(const std::size_t count,
                       on_server([&] { return server.SurvivorsFor(ids[i], survivors); }));
    f.protocol_down_bytes += count * kIdBytes;
    const Result<std::size_t> written = on_device([&] {
      return clients[i].Unmask({survivors.data(), count}, revealed);
    });
    // A device whose neighbourhood lost too many members refuses to reveal anything; the
    // server then lacks shares and aborts the round.
    if (!written.ok() && written.status().code() == StatusCode::kFailedPrecondition) continue;
    EDGESGD_TRY(written);
    f.protocol_up_bytes += *written * kRevealedBytes;
    EDGESGD_TRY(on_server([&] {
      return server.AddUnmasking(ids[i], {revealed.data(), *written});
    }));
  }
  if (Status finished = on_server([&] { return server.Finish(); }); !finished.ok()) {
    return Aborted(server, finished, f);
  }

  std::vector<std::uint32_t> expected(o.words, 0);
  for (std::uint32_t i = dropped; i < n; ++i) {
    for (std::uint32_t w = 0; w < o.words; ++w) expected[w] += inputs[i][w];
  }
  f.exact = std::equal(expected.begin(), expected.end(), server.sum().begin());
  return Status::Ok();
}

int RunBenchSecAgg(const BenchSecAggOptions& o) {
  if (o.sparse_neighbours % 2 != 0) {
    std::fprintf(stderr,
                 "edgesgd bench secagg: --neighbours must be even (k/2 on each side of "
                 "a device on the ring)\n");
    return 2;
  }
  std::vector<Figures> rows;
  for (std::uint32_t n : o.devices) {
    if (n < 3 || n > 1000) {
      // The server keeps every pair's sealed shares: n^2 of them without a neighbour graph.
      std::fprintf(stderr, "edgesgd bench secagg: --devices takes cohorts of 3 to 1000\n");
      return 2;
    }
    for (std::uint32_t neighbours : {0u, SparseNeighbours(n, o.sparse_neighbours)}) {
      if (neighbours == 0 && !rows.empty() && rows.back().devices == n) continue;
      Figures best;
      for (int r = 0; r < o.repeats; ++r) {
        Figures f;
        if (const Status s = RunRound(n, neighbours, o, static_cast<std::uint64_t>(r + 1), f);
            !s.ok()) {
          std::fprintf(stderr, "edgesgd bench secagg: a round of %u devices failed: %s\n", n,
                       s.reason());
          return 1;
        }
        if (r == 0 ||
            f.device_seconds + f.server_seconds < best.device_seconds + best.server_seconds) {
          best = f;
        }
      }
      rows.push_back(best);
    }
  }
  if (o.json) {
    std::printf("{\"words\": %u, \"dropout\": %g, \"rows\": [", o.words, o.dropout);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Figures& f = rows[i];
      std::printf(
          "%s{\"devices\": %u, \"neighbours\": %u, \"threshold\": %u, \"dropped\": %u, "
          "\"payload_bytes\": %.0f, \"protocol_up_bytes\": %.1f, "
          "\"protocol_down_bytes\": %.1f, \"device_ms\": %.3f, \"server_ms\": %.3f, "
          "\"exact\": %s}",
          i == 0 ? "" : ", ", f.devices, f.neighbours, f.threshold, f.dropped, PayloadPerDevice(f),
          PerDevice(f.protocol_up_bytes, f.devices), PerDevice(f.protocol_down_bytes, f.devices),
          f.device_seconds * 1e3 / f.devices, f.server_seconds * 1e3,
          f.aborted ? "\"aborted\""
          : f.exact ? "true"
                    : "false");
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf(
      "secure aggregation of %u words per device (%.0f B masked payload), %.0f %% of "
      "each cohort dropping out after sharing keys; best of %d rounds\n",
      o.words, 4.0 * o.words, 100 * o.dropout, o.repeats);
  std::printf("%8s %11s %4s %8s %14s %16s %10s %11s %11s %6s\n", "devices", "neighbours", "t",
              "dropped", "protocol up B", "vs payload up", "down B", "device ms", "server ms",
              "exact");
  for (const Figures& f : rows) {
    std::printf("%8u %11u %4u %8u %14.0f %15.1f%% %10.0f %11.2f %11.2f %6s\n", f.devices,
                f.neighbours, f.threshold, f.dropped, PerDevice(f.protocol_up_bytes, f.devices),
                100.0 * PerDevice(f.protocol_up_bytes, f.devices) / PayloadPerDevice(f),
                PerDevice(f.protocol_down_bytes, f.devices), f.device_seconds * 1e3 / f.devices,
                f.server_seconds * 1e3,
                f.aborted ? "abort"
                : f.exact ? "yes"
                          : "NO");
  }
  return 0;
}

}  // namespace

void AddBenchSecAggCommand(CLI::App& bench, int& exit_code) {
  auto options = std::make_shared<BenchSecAggOptions>();
  CLI::App* command = bench.add_subcommand(
      "secagg",
      "Secure aggregation's cost per round: protocol bytes per device (keys, sealed shares, "
      "revealed shares) against the masked payload, and device and server CPU time, for "
      "SecAgg (everyone masks with everyone) and SecAgg+ (k ring neighbours). The threshold is "
      "ceil(2 (k + 1) / 3) shares");
  AddConfigFlag(*command);
  command->add_option("--devices", options->devices, "Cohort sizes (3 to 1000 each)")
      ->delimiter(',')
      ->capture_default_str();
  command
      ->add_option("--words", options->words,
                   "Masked words per device (default: the 256-unit MLP under random_block "
                   "1/64)")
      ->check(CLI::Range(1u, 1u << 26))
      ->capture_default_str();
  command
      ->add_option("--dropout", options->dropout,
                   "Fraction of each cohort that vanishes after sharing keys (their masks "
                   "are then removed from reconstructed keys)")
      ->check(CLI::Range(0.0, 0.3))
      ->capture_default_str();
  command
      ->add_option("--neighbours", options->sparse_neighbours,
                   "SecAgg+ neighbourhood size k (even); default 2 ceil(log2 n) per cohort")
      ->check(CLI::Range(2u, 1u << 16));
  command->add_option("--repeats", options->repeats, "Rounds per figure; the fastest is reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  command->add_flag("--json", options->json, "Print one JSON object instead of a table");
  command->callback([options, &exit_code] { exit_code = RunBenchSecAgg(*options); });
}

}  // namespace edgesgd::cli
