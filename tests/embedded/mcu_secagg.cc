// Secure aggregation on a Cortex-M4F: the device side (X25519 key agreement, HKDF, the ChaCha20
// mask PRG, Shamir shares sealed with ChaCha20-Poly1305) through mbed TLS as compiled for the
// board, with every byte from an arena or mbed TLS's static pool. Five devices and their server
// run on the board: one round where all five finish, and one where a device vanishes after
// sharing its keys (the others' shares of its mask key remove its pair masks). Each unmasked
// sum must equal the plain sum of the survivors' inputs word for word.
//
// Prints the device's figures for the memory report: its arena, the pool's peak, its stack and
// the time of each phase for one device. Run with --instructions when qemu counts instructions
// (-icount shift=0): the clock then advances 1 ns per instruction, and the times are
// instruction counts. Prints each failure, then "EDGESGD-MCU PASS" and exit 0 only if all held.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "edgesgd/core/arena.h"
#include "edgesgd/platform/clock.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/server.h"
#include "edgesgd_mbedtls_pool.h"
#include "mcu_checks.h"
#include "memory_usage.h"
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

constexpr std::uint32_t kDevices = 5;
constexpr std::uint32_t kNeighbours = kDevices - 1;  // everyone masks with everyone
constexpr std::uint32_t kThreshold = 3;
// random_block 1/64 of the 203,530-parameter MLP: what a device of a secure run masks.
constexpr std::uint32_t kWords = 3181;
constexpr secagg::ClientLimits kClientLimits{kNeighbours, kThreshold - 1};
constexpr secagg::ServerLimits kServerLimits{kDevices, kNeighbours, kWords};
constexpr std::uint32_t kNobody = kDevices;

// The device phases whose cost is reported, in round order.
enum Phase : std::uint8_t { kAdvertise, kShareKeys, kReceiveShares, kMaskInput, kUnmask, kPhases };
constexpr std::array<const char*, kPhases> kPhaseNames = {"advertise keys", "share keys",
                                                          "receive shares", "mask input", "unmask"};

alignas(kArenaAlignment) std::byte g_arena_storage[32 * 1024];
secagg::Server g_server;
std::array<secagg::Client, kDevices> g_clients;
std::array<std::uint32_t, kDevices> g_ids{};
std::uint32_t g_inputs[kDevices][kWords];
std::uint32_t g_masked[kWords];
std::uint32_t g_expected[kWords];
std::array<secagg::RosterEntry, kNeighbours> g_roster;
std::array<secagg::SealedShares, kNeighbours> g_sealed;
std::array<std::uint32_t, kNeighbours> g_survivors;
std::array<secagg::RevealedShare, kNeighbours + 1> g_revealed;
std::array<std::uint64_t, kPhases> g_phase_ns{};

mcu_test::Checks g_checks;

// Test entropy, distinct per device and round. A real board draws it from its TRNG.
secagg::Key Entropy(std::uint32_t device, std::uint64_t round) {
  secagg::Key seed{};
  std::memcpy(seed.data(), &device, sizeof(device));
  std::memcpy(seed.data() + sizeof(device), &round, sizeof(round));
  return secagg::Sha256(seed);
}

// Runs `call` for device 0 under the clock, adding to its phase's time.
template <typename Call>
auto Timed(std::uint32_t device, Phase phase, Call&& call) {
  const std::uint64_t start = platform::MonotonicNanos();
  auto result = call();
  if (device == 0) g_phase_ns[phase] += platform::MonotonicNanos() - start;
  return result;
}

// One round in which `silent` (or kNobody) stops after sharing its keys.
Status RunRound(std::uint64_t round, std::uint32_t silent) {
  const secagg::RoundPlan plan{round, kThreshold, 0, round * 7919u, kWords};
  EDGESGD_TRY(g_server.Start(plan, g_ids));
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    secagg::KeyAdvertisement keys;
    EDGESGD_TRY(Timed(i, kAdvertise, [&] {
      return g_clients[i].Start(round, g_ids[i], Entropy(i, round), keys);
    }));
    EDGESGD_TRY(g_server.AddKeys(g_ids[i], keys));
  }
  EDGESGD_TRY(g_server.CloseKeys());
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    std::uint32_t point = 0;
    EDGESGD_TRY_ASSIGN(const std::size_t count, g_server.RosterFor(g_ids[i], point, g_roster));
    secagg::Digest commitment;
    EDGESGD_TRY_ASSIGN(const std::size_t written, Timed(i, kShareKeys, [&] {
                         return g_clients[i].ShareKeys(kThreshold, point, {g_roster.data(), count},
                                                       commitment, g_sealed);
                       }));
    EDGESGD_TRY(g_server.AddShares(g_ids[i], commitment, {g_sealed.data(), written}));
  }
  EDGESGD_TRY(g_server.CloseShares());
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    if (i == silent) continue;
    EDGESGD_TRY_ASSIGN(const std::size_t count, g_server.SharesFor(g_ids[i], g_sealed));
    EDGESGD_TRY(Timed(i, kReceiveShares, [&] {
      return g_clients[i].ReceiveShares({g_sealed.data(), count});
    }));
    std::copy_n(g_inputs[i], kWords, g_masked);
    EDGESGD_TRY(Timed(i, kMaskInput, [&] { return g_clients[i].MaskInput(g_masked); }));
    EDGESGD_TRY(g_server.AddMaskedInput(g_ids[i], g_masked));
  }
  EDGESGD_TRY(g_server.CloseInputs());
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    if (i == silent) continue;
    EDGESGD_TRY_ASSIGN(const std::size_t count, g_server.SurvivorsFor(g_ids[i], g_survivors));
    EDGESGD_TRY_ASSIGN(const std::size_t written, Timed(i, kUnmask, [&] {
                         return g_clients[i].Unmask({g_survivors.data(), count}, g_revealed);
                       }));
    EDGESGD_TRY(g_server.AddUnmasking(g_ids[i], {g_revealed.data(), written}));
  }
  return g_server.Finish();
}

void CheckRound(std::uint64_t round, std::uint32_t silent, const char* what) {
  const Status status = RunRound(round, silent);
  g_checks.ExpectOk(status, what);
  if (!status.ok()) return;
  std::fill_n(g_expected, kWords, 0u);
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    if (i == silent) continue;
    for (std::uint32_t w = 0; w < kWords; ++w) g_expected[w] += g_inputs[i][w];
  }
  const std::span<const std::uint32_t> sum = g_server.sum();
  g_checks.Expect(std::equal(sum.begin(), sum.end(), g_expected),
                  "the unmasked sum is the plain sum");
  g_checks.Expect(g_server.survivor_count() == kDevices - (silent == kNobody ? 0 : 1),
                  "the survivors are the devices whose inputs arrived");
}

bool CountsInstructions() {
  std::array<char, 256> line{};  // the image's path comes first
  const std::size_t length = platform::internal::SemihostingCommandLine(line);
  const std::string_view arguments(line.data(), length);
  return arguments.find("--instructions") != std::string_view::npos;
}

int Run() {
  Arena arena(g_arena_storage);
  g_checks.ExpectOk(g_server.Init(arena, kServerLimits), "server storage from the arena");
  const std::size_t server_bytes = arena.used_bytes();
  for (secagg::Client& client : g_clients) {
    g_checks.ExpectOk(client.Init(arena, kClientLimits), "device storage from the arena");
  }
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    g_ids[i] = 40 + 3 * i;
    for (std::uint32_t w = 0; w < kWords; ++w) g_inputs[i][w] = (i + 1) * 2654435761u + w * 40503u;
  }
  if (!g_checks.Report("secure-aggregation checks")) return 1;

  CheckRound(1, kNobody, "a round in which every device finishes");
  const std::array<std::uint64_t, kPhases> first_round_ns = g_phase_ns;
  CheckRound(2, 3, "a round in which a device vanishes after sharing its keys");
  // A device whose round was wiped refuses to mask until its next Start.
  g_checks.Expect(!g_clients[3].MaskInput(g_masked).ok(),
                  "a finished device refuses to mask again");
  if (!g_checks.Report("secure-aggregation checks")) {
    return 1;
  }

  const char* unit = CountsInstructions() ? "instructions" : "ns";
  std::uint64_t total = 0;
  for (std::size_t p = 0; p < kPhases; ++p) {
    Log(LogLevel::kInfo, "secagg device phase: %s %llu %s", kPhaseNames[p],
        static_cast<unsigned long long>(first_round_ns[p]), unit);
    total += first_round_ns[p];
  }
  Log(LogLevel::kInfo,
      "secagg device: %u neighbours, %u words, arena %zu B, mbed TLS pool peak %zu of %zu B, "
      "round %llu %s",
      static_cast<unsigned>(kNeighbours), static_cast<unsigned>(kWords),
      secagg::Client::ArenaBytes(kClientLimits), mbedtls_pool::PeakBytes(),
      mbedtls_pool::kPoolBytes, static_cast<unsigned long long>(total), unit);
  Log(LogLevel::kInfo, "secagg server on the board: arena %zu B", server_bytes);
  platform::internal::LogMemoryUse();
  Log(LogLevel::kInfo, "%d secure-aggregation checks hold", g_checks.checked());
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
