// `edgesgd bench secagg`: what secure aggregation costs per round, for cohorts of several sizes,
// with every device masking with every other (SecAgg) and with O(log n) ring neighbours
// (SecAgg+). All devices and the server run in this process, phase by phase, over the library's
// state machines (edgesgd::secagg), so the figures are the protocol's own: the bytes of each
// message's fields (ids, keys, sealed shares, revealed shares), the masked payload of the chosen
// integer encoding beside the plain compressed payload it replaces, and the CPU time of each
// side. With --signed, each configuration runs unsigned and signed (ECDSA P-256 signatures of
// the keys and the consistency check), and the table adds what signing costs.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/clock.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/ecdsa.h"
#include "edgesgd/secagg/fixed_point.h"
#include "edgesgd/secagg/lanes.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/secagg/server.h"

namespace edgesgd::cli {
namespace {

// How a device's values enter the masked sum (docs/secure-aggregation.md).
enum class Encoding { kFixedPoint, kVotes, kQsgd };

struct BenchSecAggOptions {
  std::vector<std::uint32_t> devices{8, 32, 100};
  std::uint32_t values = 0;  // 0: ValuesFor(encoding)
  std::string encoding_name = "fixed";
  Encoding encoding = Encoding::kFixedPoint;
  std::uint32_t qsgd_bits = 4;
  double dropout = 0.0;
  std::uint32_t sparse_neighbours = 0;  // 0: 2 ceil(log2 n) for each cohort
  int repeats = 3;
  bool json = false;
  bool signed_rounds = false;  // --signed
};

// Signed rounds' long-term keys for devices 1..n, made before any round is timed.
struct SigningKit {
  explicit SigningKit(std::uint32_t n) {
    secagg::SecretRandom random(secagg::Sha256(std::array<std::byte, 1>{std::byte{7}}));
    for (std::uint32_t device = 1; device <= n; ++device) {
      secagg::SigningKey key;
      ring.push_back({device, {}});
      ok = ok && secagg::GenerateSigningKey(random, key, ring.back().key).ok();
      signers.push_back(std::make_unique<secagg::EcdsaSigner>(key));
      secagg::Wipe(key);
    }
    verifier = std::make_unique<secagg::EcdsaVerifier>(ring);
  }
  std::vector<secagg::DeviceVerifyingKey> ring;
  std::vector<std::unique_ptr<secagg::EcdsaSigner>> signers;
  std::unique_ptr<secagg::EcdsaVerifier> verifier;
  bool ok = true;
};

// Field bytes of each message, as they travel.
constexpr std::size_t kIdBytes = 4;
constexpr std::size_t kAdvertisementBytes = 2 * secagg::kKeyBytes;
constexpr std::size_t kRosterEntryBytes = 2 * kIdBytes + 2 * secagg::kKeyBytes;
constexpr std::size_t kSealedEntryBytes = kIdBytes + secagg::kSealedSharesBytes;
constexpr std::size_t kRevealedBytes = kIdBytes + 1 + secagg::kShareBytes;
constexpr std::size_t kSignatureEntryBytes = kIdBytes + secagg::kSignatureBytes;

// The MLP with 256 hidden units on Fashion-MNIST has 203,530 parameters. random_block 1/64
// sends ceil(203,530 / 64) of them as values; sign and qsgd compress all of them.
constexpr std::uint32_t kMlpParameters = 203530;
std::uint32_t ValuesFor(Encoding encoding) {
  return encoding == Encoding::kFixedPoint ? (kMlpParameters + 63) / 64 : kMlpParameters;
}

// Bytes a device's values take in the plain compressed payload the encoding replaces, as the
// codec itself sizes it over one tensor of the values: float32 values (identity, random_block,
// rand_k), one sign bit each and the tensor's scale, or packed qsgd levels and their buckets'
// norms.
Result<std::size_t> PlainPayloadBytes(const BenchSecAggOptions& o) {
  EDGESGD_TRY_ASSIGN(const TensorLayout layout, TensorLayout::Single(o.values));
  CodecParams codec;  // identity
  if (o.encoding == Encoding::kVotes) codec = SignParams{.scale = SignScale::kUnit};
  if (o.encoding == Encoding::kQsgd) {
    EDGESGD_TRY_ASSIGN(const std::uint32_t levels, QsgdLevelsForBits(o.qsgd_bits));
    codec = QsgdParams{.levels = levels};
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(codec, layout));
  return shape.bytes();
}

// A device's values, encoded for a cohort of n: what it masks. Values lie in [-0.8, 0.8], inside
// the fixed point's bound and the qsgd scale, both 1.
Result<std::vector<std::uint32_t>> EncodedInput(const BenchSecAggOptions& o, std::uint32_t n,
                                                std::uint32_t device, std::uint64_t round) {
  std::vector<float> values(o.values);
  for (std::uint32_t j = 0; j < o.values; ++j) {
    values[j] =
        0.8f * std::sin(0.37f * static_cast<float>(device) + 0.011f * static_cast<float>(j));
  }
  switch (o.encoding) {
    case Encoding::kFixedPoint: {
      EDGESGD_TRY_ASSIGN(const secagg::FixedPoint format, secagg::ChooseFixedPoint(1.0f, n));
      std::vector<std::uint32_t> words(o.values);
      secagg::EncodeFixedPoint(format, values, words);
      return words;
    }
    case Encoding::kVotes: {
      EDGESGD_TRY_ASSIGN(const std::uint32_t lane_bits, secagg::LaneBits(n));
      std::vector<std::uint32_t> signs((o.values + 31) / 32, 0u);
      for (std::uint32_t j = 0; j < o.values; ++j) {
        if (values[j] > 0.0f) signs[j / 32] |= 1u << (j % 32);
      }
      std::vector<std::uint32_t> words(secagg::LaneWords(o.values, lane_bits));
      secagg::PackVotes(signs, o.values, lane_bits, words);
      return words;
    }
    case Encoding::kQsgd: {
      EDGESGD_TRY_ASSIGN(const std::uint32_t levels, QsgdLevelsForBits(o.qsgd_bits));
      EDGESGD_TRY_ASSIGN(const secagg::SharedScaleLevels format,
                         secagg::ChooseSharedScaleLevels(1.0f, levels, n));
      std::vector<std::uint32_t> words(secagg::SharedScaleLevelWords(format, o.values));
      CounterRng dither(round, static_cast<std::uint32_t>(round), 0, device);
      secagg::EncodeSharedScaleLevels(format, values, dither, words);
      return words;
    }
  }
  return Status::InvalidArgument("unknown encoding");
}

struct SecaggFigures {
  std::uint32_t devices = 0;
  std::uint32_t neighbours = 0;
  std::uint32_t threshold = 0;
  std::uint32_t dropped = 0;
  // Totals over the cohort: the masked payload over the devices whose input arrived, the
  // protocol's bytes over every device.
  std::size_t payload_bytes = 0;
  std::size_t plain_payload_bytes = 0;  // per device
  std::size_t protocol_up_bytes = 0;
  std::size_t protocol_down_bytes = 0;
  double device_seconds = 0;  // all devices, all phases
  double server_seconds = 0;  // per round
  bool exact = false;
  bool aborted = false;
};

// One configuration: its unsigned round, and with --signed the same round signed.
struct SecaggRow {
  SecaggFigures plain;
  std::optional<SecaggFigures> signed_round;
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
double PayloadPerDevice(const SecaggFigures& f) {
  return PerDevice(f.payload_bytes, f.devices - f.dropped);
}
// A device's whole secure uplink (masked payload and protocol bytes) over its plain payload.
double SecureUplinkVsPlain(const SecaggFigures& f) {
  return (PayloadPerDevice(f) + PerDevice(f.protocol_up_bytes, f.devices)) /
         static_cast<double>(f.plain_payload_bytes);
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
Status Aborted(const secagg::Server& server, Status status, SecaggFigures& f) {
  if (server.phase() != secagg::Server::Phase::kAborted ||
      status.code() != StatusCode::kUnavailable) {
    return status;
  }
  f.aborted = true;
  return Status::Ok();
}

// One round, signed with `kit`'s keys unless it is null. A round the server aborts (too many
// drop-outs in one neighbourhood) is a figure, not an error: `aborted` says so. Any other failure
// is returned.
Status RunRound(std::uint32_t n, std::uint32_t neighbours, const BenchSecAggOptions& o,
                std::uint64_t round, const SigningKit* kit, SecaggFigures& f) {
  const std::uint32_t degree = secagg::NeighbourhoodSize(n, neighbours);
  const std::uint32_t threshold = Threshold(degree + 1);
  const auto dropped = static_cast<std::uint32_t>(std::floor(o.dropout * n));
  f = SecaggFigures{n, degree, threshold, dropped};
  EDGESGD_TRY_ASSIGN(f.plain_payload_bytes, PlainPayloadBytes(o));
  std::vector<std::vector<std::uint32_t>> inputs(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    EDGESGD_TRY_ASSIGN(inputs[i], EncodedInput(o, n, i, round));
  }
  const auto words = static_cast<std::uint32_t>(inputs[0].size());
  // One arena for the server and every client (the bench plays all of them).
  const secagg::ServerLimits server_limits{n, degree, words};
  const secagg::ClientLimits client_limits{degree, std::min(degree, threshold)};
  std::vector<std::byte> storage(secagg::Server::ArenaBytes(server_limits) +
                                 n * secagg::Client::ArenaBytes(client_limits) + kArenaAlignment);
  Arena arena(storage);
  secagg::Server server;
  std::vector<secagg::Client> clients(n);
  std::vector<std::uint32_t> ids(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    ids[i] = i + 1;
    EDGESGD_TRY(clients[i].Init(arena, client_limits));
  }
  EDGESGD_TRY(server.Init(arena, server_limits));
  if (kit != nullptr) {
    EDGESGD_TRY(server.SetVerifier(kit->verifier.get()));
    for (std::uint32_t i = 0; i < n; ++i) {
      EDGESGD_TRY(clients[i].SetSigning({kit->signers[i].get(), kit->verifier.get()}));
    }
  }
  const std::size_t signature_bytes = kit != nullptr ? secagg::kSignatureBytes : 0;
  const secagg::RoundPlan plan{round, threshold, neighbours, round * 7919 + n, words};
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
    f.protocol_up_bytes += kAdvertisementBytes + signature_bytes;
  }
  EDGESGD_TRY(on_server([&] { return server.CloseKeys(); }));

  std::vector<secagg::RosterEntry> roster(degree);
  std::vector<secagg::SealedShares> sealed(degree);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t point = 0;
    EDGESGD_TRY_ASSIGN(const std::size_t count,
                       on_server([&] { return server.RosterFor(ids[i], point, roster); }));
    f.protocol_down_bytes += 2 * kIdBytes + count * (kRosterEntryBytes + signature_bytes);
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
    f.payload_bytes += std::size_t{4} * words;
    EDGESGD_TRY(on_server([&] { return server.AddMaskedInput(ids[i], masked); }));
  }
  if (Status closed = on_server([&] { return server.CloseInputs(); }); !closed.ok()) {
    return Aborted(server, closed, f);
  }

  // Signed rounds: the whole survivor set, each device's signature of it, and its neighbours'.
  std::vector<std::uint32_t> survivors(n);
  std::vector<secagg::SurvivorSignature> signatures(degree);
  if (kit != nullptr) {
    for (std::uint32_t i = dropped; i < n; ++i) {
      EDGESGD_TRY_ASSIGN(const std::size_t count,
                         on_server([&] { return server.SurvivorsFor(ids[i], survivors); }));
      f.protocol_down_bytes += count * kIdBytes;
      secagg::Signature signature;
      const Status signed_set = on_device([&] {
        return clients[i].SignSurvivors({survivors.data(), count}, signature);
      });
      if (signed_set.code() == StatusCode::kFailedPrecondition) continue;  // too few survived
      EDGESGD_TRY(signed_set);
      f.protocol_up_bytes += signature_bytes;
      EDGESGD_TRY(on_server([&] { return server.AddSignature(ids[i], signature); }));
    }
    if (Status closed = on_server([&] { return server.CloseSignatures(); }); !closed.ok()) {
      return Aborted(server, closed, f);
    }
  }
  std::vector<secagg::RevealedShare> revealed(degree + 1);
  for (std::uint32_t i = dropped; i < n; ++i) {
    Result<std::size_t> written = Status::Internal();
    if (kit != nullptr) {
      if (!server.Expects(ids[i])) continue;
      EDGESGD_TRY_ASSIGN(const std::size_t count,
                         on_server([&] { return server.SignaturesFor(ids[i], signatures); }));
      f.protocol_down_bytes += count * kSignatureEntryBytes;
      written = on_device(
          [&] { return clients[i].Unmask(std::span(signatures).first(count), revealed); });
    } else {
      EDGESGD_TRY_ASSIGN(const std::size_t count,
                         on_server([&] { return server.SurvivorsFor(ids[i], survivors); }));
      f.protocol_down_bytes += count * kIdBytes;
      written = on_device([&] { return clients[i].Unmask({survivors.data(), count}, revealed); });
    }
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

  std::vector<std::uint32_t> expected(words, 0);
  for (std::uint32_t i = dropped; i < n; ++i) {
    for (std::uint32_t w = 0; w < words; ++w) expected[w] += inputs[i][w];
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
  std::vector<SecaggRow> rows;
  for (std::uint32_t n : o.devices) {
    if (n < 3 || n > 1000) {
      // The server keeps every pair's sealed shares: n^2 of them without a neighbour graph.
      std::fprintf(stderr, "edgesgd bench secagg: --devices takes cohorts of 3 to 1000\n");
      return 2;
    }
    std::unique_ptr<SigningKit> kit;
    if (o.signed_rounds) {
      kit = std::make_unique<SigningKit>(n);
      if (!kit->ok) {
        std::fprintf(stderr, "edgesgd bench secagg: cannot generate signing keys\n");
        return 1;
      }
    }
    for (std::uint32_t neighbours : {0u, SparseNeighbours(n, o.sparse_neighbours)}) {
      if (neighbours == 0 && !rows.empty() && rows.back().plain.devices == n) continue;
      // The fastest of the repeats, unsigned (null) or signed with `signing`.
      const auto best_of = [&](const SigningKit* signing) -> Result<SecaggFigures> {
        SecaggFigures best;
        for (int r = 0; r < o.repeats; ++r) {
          SecaggFigures f;
          EDGESGD_TRY(RunRound(n, neighbours, o, static_cast<std::uint64_t>(r + 1), signing, f));
          if (r == 0 ||
              f.device_seconds + f.server_seconds < best.device_seconds + best.server_seconds) {
            best = f;
          }
        }
        return best;
      };
      SecaggRow row;
      Result<SecaggFigures> plain = best_of(nullptr);
      Result<SecaggFigures> signed_round =
          kit ? best_of(kit.get()) : Result<SecaggFigures>(SecaggFigures{});
      for (const Result<SecaggFigures>* result : {&plain, &signed_round}) {
        if (!result->ok()) {
          std::fprintf(stderr, "edgesgd bench secagg: a %sround of %u devices failed: %s\n",
                       result == &signed_round ? "signed " : "", n, result->status().reason());
          return 1;
        }
      }
      row.plain = plain.value();
      if (kit) row.signed_round = signed_round.value();
      rows.push_back(row);
    }
  }
  const char* encoding = o.encoding_name.c_str();
  const auto verdict = [](const SecaggFigures& f) {
    return f.aborted ? "abort" : f.exact ? "yes" : "NO";
  };
  if (o.json) {
    std::printf("{\"encoding\": \"%s\", \"values\": %u, \"dropout\": %g, \"rows\": [", encoding,
                o.values, o.dropout);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const SecaggFigures& f = rows[i].plain;
      std::printf(
          "%s{\"devices\": %u, \"neighbours\": %u, \"threshold\": %u, \"dropped\": %u, "
          "\"plain_payload_bytes\": %zu, \"masked_payload_bytes\": %.0f, "
          "\"protocol_up_bytes\": %.1f, \"protocol_down_bytes\": %.1f, "
          "\"secure_uplink_vs_plain\": %.4f, \"device_ms\": %.3f, \"server_ms\": %.3f, "
          "\"exact\": %s",
          i == 0 ? "" : ", ", f.devices, f.neighbours, f.threshold, f.dropped,
          f.plain_payload_bytes, PayloadPerDevice(f), PerDevice(f.protocol_up_bytes, f.devices),
          PerDevice(f.protocol_down_bytes, f.devices), SecureUplinkVsPlain(f),
          f.device_seconds * 1e3 / f.devices, f.server_seconds * 1e3,
          f.aborted ? "\"aborted\""
          : f.exact ? "true"
                    : "false");
      if (rows[i].signed_round) {
        const SecaggFigures& s = *rows[i].signed_round;
        std::printf(
            ", \"signed\": {\"protocol_up_bytes\": %.1f, \"protocol_down_bytes\": %.1f, "
            "\"device_ms\": %.3f, \"server_ms\": %.3f, \"exact\": %s}",
            PerDevice(s.protocol_up_bytes, s.devices), PerDevice(s.protocol_down_bytes, s.devices),
            s.device_seconds * 1e3 / s.devices, s.server_seconds * 1e3,
            s.aborted ? "\"aborted\""
            : s.exact ? "true"
                      : "false");
      }
      std::printf("}");
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf(
      "secure aggregation of %u values per device encoded as %s, %.0f %% of each cohort "
      "dropping out after sharing keys; best of %d rounds\n",
      o.values, encoding, 100 * o.dropout, o.repeats);
  std::printf("%8s %11s %4s %8s %10s %11s %12s %13s %10s %10s %10s %6s", "devices", "neighbours",
              "t", "dropped", "plain B", "masked B", "protocol B", "secure/plain", "down B",
              "device ms", "server ms", "exact");
  if (o.signed_rounds) {
    std::printf(" | %10s %10s %11s %11s %6s", "signed +up", "+down B", "+device ms", "+server ms",
                "exact");
  }
  std::printf("\n");
  for (const SecaggRow& row : rows) {
    const SecaggFigures& f = row.plain;
    std::printf("%8u %11u %4u %8u %10zu %11.0f %12.0f %12.1f%% %10.0f %10.2f %10.2f %6s", f.devices,
                f.neighbours, f.threshold, f.dropped, f.plain_payload_bytes, PayloadPerDevice(f),
                PerDevice(f.protocol_up_bytes, f.devices), 100.0 * SecureUplinkVsPlain(f),
                PerDevice(f.protocol_down_bytes, f.devices), f.device_seconds * 1e3 / f.devices,
                f.server_seconds * 1e3, verdict(f));
    if (row.signed_round) {
      const SecaggFigures& s = *row.signed_round;
      std::printf(" | %10.0f %10.0f %11.2f %11.2f %6s",
                  PerDevice(s.protocol_up_bytes - f.protocol_up_bytes, f.devices),
                  PerDevice(s.protocol_down_bytes - f.protocol_down_bytes, f.devices),
                  (s.device_seconds - f.device_seconds) * 1e3 / f.devices,
                  (s.server_seconds - f.server_seconds) * 1e3, verdict(s));
    }
    std::printf("\n");
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
      ->add_option("--values", options->values,
                   "Values each device contributes (default, for the 256-unit MLP: 3181, what "
                   "random_block 1/64 sends, with fixed; all 203530 parameters with votes and "
                   "qsgd)")
      ->check(CLI::Range(1u, 1u << 26));
  command
      ->add_option("--encoding", options->encoding_name,
                   "How the values enter the masked sum: fixed (fixed point, for identity, "
                   "random_block and rand_k values), votes (sign votes in lanes, for majority "
                   "vote) or qsgd (levels of a shared scale in lanes)")
      ->check(CLI::IsMember({"fixed", "votes", "qsgd"}))
      ->capture_default_str();
  CLI::Option* qsgd_bits =
      command
          ->add_option("--qsgd-bits", options->qsgd_bits,
                       "--encoding qsgd: bits per value of the plain qsgd payload, sign "
                       "included (levels = 2^(bits-1) - 1)")
          ->check(CLI::Range(kMinQsgdBits, kMaxQsgdBits))
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
  command->add_flag("--signed", options->signed_rounds,
                    "Also run each configuration signed (--secagg-signed: ECDSA P-256 "
                    "signatures of the keys and the consistency check before unmasking) and "
                    "report what signing adds: bytes up and down per device, device CPU per "
                    "device, server CPU per round");
  command->callback([options, qsgd_bits, &exit_code] {
    options->encoding = options->encoding_name == "votes"  ? Encoding::kVotes
                        : options->encoding_name == "qsgd" ? Encoding::kQsgd
                                                           : Encoding::kFixedPoint;
    if (options->values == 0) options->values = ValuesFor(options->encoding);
    if (qsgd_bits->count() > 0 && options->encoding != Encoding::kQsgd) {
      std::fprintf(stderr, "edgesgd bench secagg: --qsgd-bits applies to --encoding qsgd only\n");
      exit_code = 2;
      return;
    }
    exit_code = RunBenchSecAgg(*options);
  });
}

}  // namespace edgesgd::cli
