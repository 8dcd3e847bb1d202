// Whole secure-aggregation rounds between a Server and Clients, with devices vanishing in each
// phase, too many vanishing, tampered, replayed and misattributed shares, late inputs, the sparse
// neighbour graph, and a chi-square test that a masked input looks uniform.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/lanes.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/secagg/server.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

using testing::Arenas;
using testing::Phase;
using enum testing::Phase;
using testing::Plan;
using testing::ShareKeys;
using testing::TestKey;

// A cohort, its inputs, and which devices stay silent from which phase on.
struct Fleet {
  Fleet(std::uint32_t n, std::uint32_t words, std::uint32_t neighbours)
      : ids(n), inputs(n, std::vector<std::uint32_t>(words)), clients(n) {
    for (std::uint32_t i = 0; i < n; ++i) {
      ids[i] = 100 + 7 * i;  // ids are not positions
      for (std::uint32_t w = 0; w < words; ++w) inputs[i][w] = (i + 1) * 1000003u + w * 7919u;
    }
    const std::uint32_t degree = NeighbourhoodSize(n, neighbours);
    EXPECT_TRUE(arenas.Init(server, ServerLimits{n, degree, words}).ok());
    for (Client& client : clients) {
      EXPECT_TRUE(
          arenas.Init(client, ClientLimits{degree, std::min<std::uint32_t>(degree, 2)}).ok());
    }
  }

  void SilenceFrom(Phase phase, std::uint32_t index) { silent_from[index] = phase; }
  // One device drops out in each phase: devices[0] from kKeys on, devices[1] from kShares, ...
  void SilenceOnePerPhase(std::array<std::uint32_t, 4> devices) {
    for (const Phase phase : {kKeys, kShares, kInputs, kUnmasking}) {
      SilenceFrom(phase, devices[phase]);
    }
  }
  bool Speaks(std::uint32_t index, Phase phase) const {
    const auto found = silent_from.find(index);
    return found == silent_from.end() || found->second > phase;
  }

  std::vector<std::uint32_t> Sum() const { return {server.sum().begin(), server.sum().end()}; }

  std::vector<std::uint32_t> ExpectedSum() const {
    std::vector<std::uint32_t> sum(inputs[0].size(), 0);
    for (std::uint32_t i = 0; i < ids.size(); ++i) {
      if (!server.Survived(ids[i])) continue;
      for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += inputs[i][w];
    }
    return sum;
  }

  // Runs one round; returns the first server-side failure (the round's outcome).
  Status Run(const RoundPlan& plan) {
    const std::uint32_t n = static_cast<std::uint32_t>(ids.size());
    EDGESGD_TRY(server.Start(plan, ids));
    const std::size_t degree = server.neighbourhood_size();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!Speaks(i, kKeys)) continue;
      KeyAdvertisement keys;
      EDGESGD_TRY(clients[i].Start(plan.round, ids[i], TestKey(11, plan.round, i), keys));
      EDGESGD_TRY(server.AddKeys(ids[i], keys));
    }
    EDGESGD_TRY(server.CloseKeys());
    std::vector<RosterEntry> roster(degree);
    std::vector<SealedShares> sealed(degree);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!Speaks(i, kShares) || !server.Expects(ids[i])) continue;
      EDGESGD_TRY(ShareKeys(server, clients[i], ids[i], plan.threshold, roster, sealed,
                            [](std::span<RosterEntry>) {}));
    }
    EDGESGD_TRY(server.CloseShares());
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!Speaks(i, kInputs) || !server.Expects(ids[i])) continue;
      EDGESGD_TRY_ASSIGN(const std::size_t count, server.SharesFor(ids[i], sealed));
      if (tamper_delivery && i == 0 && count > 0) sealed[0].sealed[5] ^= std::byte{0x40};
      EDGESGD_TRY(clients[i].ReceiveShares({sealed.data(), count}));
      std::vector<std::uint32_t> masked = inputs[i];
      EDGESGD_TRY(clients[i].MaskInput(masked));
      last_masked = masked;
      EDGESGD_TRY(server.AddMaskedInput(ids[i], masked));
    }
    EDGESGD_TRY(server.CloseInputs());
    if (stop_before_unmasking) return Status::Ok();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!Speaks(i, kUnmasking) || !server.Expects(ids[i])) continue;
      EDGESGD_TRY(UnmaskDevice(i));
    }
    return server.Finish();
  }

  Status UnmaskDevice(std::uint32_t i) {
    const std::size_t degree = server.neighbourhood_size();
    std::vector<std::uint32_t> survivors(degree);
    std::vector<RevealedShare> revealed(degree + 1);
    EDGESGD_TRY_ASSIGN(const std::size_t count, server.SurvivorsFor(ids[i], survivors));
    EDGESGD_TRY_ASSIGN(const std::size_t written,
                       clients[i].Unmask({survivors.data(), count}, revealed));
    return server.AddUnmasking(ids[i], {revealed.data(), written});
  }

  std::vector<std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> inputs;
  Arenas arenas;  // before the parties it serves
  std::vector<Client> clients;
  Server server;
  std::map<std::uint32_t, Phase> silent_from;
  std::vector<std::uint32_t> last_masked;
  bool tamper_delivery = false;  // alters the first share delivered to device 0
  bool stop_before_unmasking = false;
};

TEST(SecureAggregationRoundTest, UnmaskedSumEqualsThePlainSumBitForBit) {
  Fleet fleet(8, 257, 0);
  ASSERT_TRUE(fleet.Run(Plan(1, 5, 257)).ok());
  EXPECT_EQ(fleet.server.survivor_count(), 8u);
  const auto sum = fleet.server.sum();
  EXPECT_EQ(std::vector<std::uint32_t>(sum.begin(), sum.end()), fleet.ExpectedSum());
  // Rounds are independent: the same fleet runs another.
  ASSERT_TRUE(fleet.Run(Plan(2, 5, 257)).ok());
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

TEST(SecureAggregationRoundTest, RecoversFromDropOutsInEveryPhase) {
  for (Phase phase : {kKeys, kShares, kInputs, kUnmasking}) {
    Fleet fleet(8, 33, 0);
    fleet.SilenceFrom(phase, 2);
    fleet.SilenceFrom(phase, 5);
    fleet.SilenceFrom(phase, 7);  // n - t = 3 may vanish
    ASSERT_TRUE(fleet.Run(Plan(5, 5, 33)).ok()) << phase;
    // Devices silent before their input was sent are left out of the sum; from unmasking on,
    // their inputs are in it.
    EXPECT_EQ(fleet.server.survivor_count(), phase == kUnmasking ? 8u : 5u) << phase;
    EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum()) << phase;
  }
}

TEST(SecureAggregationRoundTest, DropOutsSpreadOverThePhasesAreRecovered) {
  Fleet fleet(12, 40, 0);
  fleet.SilenceOnePerPhase({0, 3, 5, 11});
  ASSERT_TRUE(fleet.Run(Plan(3, 7, 40)).ok());
  EXPECT_EQ(fleet.server.survivor_count(), 9u);
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

TEST(SecureAggregationRoundTest, TooManyDropOutsAbortTheRoundInEveryPhase) {
  for (Phase phase : {kKeys, kShares, kInputs, kUnmasking}) {
    Fleet fleet(8, 16, 0);
    for (std::uint32_t i : {1u, 2u, 3u, 4u}) fleet.SilenceFrom(phase, i);  // n - t + 1
    const Status status = fleet.Run(Plan(4, 5, 16));
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << phase << ": " << status.reason();
    EXPECT_EQ(fleet.server.phase(), Server::Phase::kAborted) << phase;
  }
}

// Device 0 receives a tampered share: it drops that share and stays in the round, which still
// has t good shares of every secret, and completes.
TEST(SecureAggregationRoundTest, ATamperedShareIsDroppedAndTheRoundCompletes) {
  Fleet fleet(6, 8, 0);
  fleet.tamper_delivery = true;
  const Status status = fleet.Run(Plan(6, 4, 8));
  ASSERT_TRUE(status.ok()) << status.reason();
  EXPECT_EQ(fleet.clients[0].unopened_shares(), 1u);
  for (std::size_t i = 1; i < fleet.clients.size(); ++i) {
    EXPECT_EQ(fleet.clients[i].unopened_shares(), 0u);
  }
  EXPECT_EQ(fleet.server.survivor_count(), 6u);
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

// Sealed shares from one round, delivered in the next, or presented as another sender's, do
// not open: the device holds none of them, and stays in the round.
TEST(SecureAggregationRoundTest, ReplayedAndMisattributedSharesAreNotHeld) {
  const std::uint32_t n = 4;
  Arenas arenas;
  Server server;
  ASSERT_TRUE(arenas.Init(server, ServerLimits{n, n - 1, 4}).ok());
  std::vector<Client> clients(n);
  std::vector<std::uint32_t> ids{1, 2, 3, 4};
  for (Client& c : clients) ASSERT_TRUE(arenas.Init(c, ClientLimits{n - 1, 1}).ok());
  std::vector<SealedShares> previous;
  for (std::uint64_t round : {1u, 2u}) {
    ASSERT_TRUE(server.Start(Plan(round, 3, 4), ids).ok());
    for (std::uint32_t i = 0; i < n; ++i) {
      KeyAdvertisement keys;
      ASSERT_TRUE(clients[i].Start(round, ids[i], TestKey(12, round, i), keys).ok());
      ASSERT_TRUE(server.AddKeys(ids[i], keys).ok());
    }
    ASSERT_TRUE(server.CloseKeys().ok());
    std::vector<RosterEntry> roster(n - 1);
    std::vector<SealedShares> sealed(n - 1);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t point;
      const std::size_t count = server.RosterFor(ids[i], point, roster).value();
      Digest commitment;
      const std::size_t written =
          clients[i].ShareKeys(3, point, {roster.data(), count}, commitment, sealed).value();
      ASSERT_TRUE(server.AddShares(ids[i], commitment, {sealed.data(), written}).ok());
    }
    ASSERT_TRUE(server.CloseShares().ok());
    std::vector<SealedShares> delivered(n - 1);
    const std::size_t count = server.SharesFor(ids[0], delivered).value();
    ASSERT_EQ(count, n - 1);
    if (round == 1) {
      previous = delivered;
      // Misattributed: a share sealed by device 2, presented as coming from device 3.
      std::swap(delivered[0].device, delivered[1].device);
      ASSERT_TRUE(clients[0].ReceiveShares(delivered).ok());
      EXPECT_EQ(clients[0].unopened_shares(), 2u);
    } else {
      // Replayed: round 1's sealed shares, delivered in round 2.
      ASSERT_TRUE(clients[0].ReceiveShares(previous).ok());
      EXPECT_EQ(clients[0].unopened_shares(), 2u + (n - 1));
    }
    EXPECT_EQ(clients[0].phase(), Client::Phase::kSharesReceived);
    std::vector<std::uint32_t> words(4, 0);
    ASSERT_TRUE(clients[0].MaskInput(words).ok());
    // Only the shares it opened (and its own) can be revealed.
    std::vector<std::uint32_t> survivors(ids.begin() + 1, ids.end());
    std::vector<RevealedShare> revealed(n);
    const std::size_t written = clients[0].Unmask(survivors, revealed).value();
    EXPECT_EQ(written, round == 1 ? n - 2 : 1u);
  }
}

TEST(SecureAggregationRoundTest, ALateInputIsRefusedAndItsOwnerCannotBeUnmasked) {
  Fleet fleet(6, 8, 0);
  fleet.SilenceFrom(kInputs, 4);
  // Run up to the unmasking phase by hand for device 4's late input.
  ASSERT_TRUE(fleet.Run(Plan(8, 4, 8)).ok());
  std::vector<std::uint32_t> late(8, 1);
  EXPECT_EQ(fleet.server.AddMaskedInput(fleet.ids[4], late).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fleet.server.Survived(fleet.ids[4]));
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

TEST(SecureAggregationRoundTest, ServerRefusesSharesItMustNotLearnAndKeepsNoneOfThem) {
  // A revealed self-mask seed share of a device whose input never arrived (with its mask key it
  // would unmask that device's late input) is refused, as are shares about strangers and two
  // shares about one owner; nothing of a refused message is kept.
  Fleet fleet(5, 4, 0);
  fleet.SilenceFrom(kInputs, 1);
  fleet.stop_before_unmasking = true;
  ASSERT_TRUE(fleet.Run(Plan(9, 3, 4)).ok());
  ASSERT_EQ(fleet.server.phase(), Server::Phase::kCollectingUnmasking);
  std::vector<std::uint32_t> survivors(4);
  const std::size_t count = fleet.server.SurvivorsFor(fleet.ids[0], survivors).value();
  std::vector<RevealedShare> revealed(5);
  const std::size_t written = fleet.clients[0].Unmask({survivors.data(), count}, revealed).value();
  revealed.resize(written);
  const auto about_dropped = std::find_if(revealed.begin(), revealed.end(),
                                          [&](const auto& r) { return r.owner == fleet.ids[1]; });
  ASSERT_NE(about_dropped, revealed.end());
  EXPECT_EQ(about_dropped->kind, SecretKind::kMaskKey);

  auto forged = revealed;
  forged[static_cast<std::size_t>(about_dropped - revealed.begin())].kind =
      SecretKind::kSelfMaskSeed;
  EXPECT_EQ(fleet.server.AddUnmasking(fleet.ids[0], forged).code(), StatusCode::kDataLoss);
  forged = revealed;
  forged.back().owner = 999;
  EXPECT_EQ(fleet.server.AddUnmasking(fleet.ids[0], forged).code(), StatusCode::kDataLoss);
  forged = revealed;
  forged.push_back(forged.front());
  EXPECT_EQ(fleet.server.AddUnmasking(fleet.ids[0], forged).code(), StatusCode::kDataLoss);

  // The device reveals once per round.
  EXPECT_EQ(fleet.clients[0].Unmask({survivors.data(), count}, revealed).status().code(),
            StatusCode::kFailedPrecondition);

  ASSERT_TRUE(fleet.server.AddUnmasking(fleet.ids[0], revealed).ok());
  for (std::uint32_t i : {2u, 3u, 4u}) ASSERT_TRUE(fleet.UnmaskDevice(i).ok());
  ASSERT_TRUE(fleet.server.Finish().ok());
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

// Devices among 5 (t = 3) reveal wrong shares of every secret they hold. With one or two of
// them, the others still hold t good shares of each secret: reconstruction leaves the wrong ones
// out and the sum is exact. With three, no secret has t good shares: the round aborts rather
// than produce a wrong sum.
TEST(SecureAggregationRoundTest, WrongRevealedSharesAreLeftOutWhileTGoodOnesRemain) {
  for (const std::uint32_t liars : {1u, 2u, 3u}) {
    SCOPED_TRACE(liars);
    Fleet fleet(5, 4, 0);
    fleet.stop_before_unmasking = true;
    ASSERT_TRUE(fleet.Run(Plan(10, 3, 4)).ok());
    for (std::uint32_t i = 0; i < 5; ++i) {
      if (i >= liars) {
        ASSERT_TRUE(fleet.UnmaskDevice(i).ok());
        continue;
      }
      std::vector<std::uint32_t> survivors(4);
      const std::size_t count = fleet.server.SurvivorsFor(fleet.ids[i], survivors).value();
      std::vector<RevealedShare> revealed(5);
      const std::size_t written =
          fleet.clients[i].Unmask({survivors.data(), count}, revealed).value();
      for (std::size_t r = 0; r < written; ++r) revealed[r].share.y[2] ^= 0x10u;
      ASSERT_TRUE(fleet.server.AddUnmasking(fleet.ids[i], {revealed.data(), written}).ok());
    }
    if (liars < 3) {
      ASSERT_TRUE(fleet.server.Finish().ok());
      EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
      EXPECT_EQ(fleet.server.wrong_revealers(), liars);
    } else {
      EXPECT_EQ(fleet.server.Finish().code(), StatusCode::kDataLoss);
      EXPECT_EQ(fleet.server.phase(), Server::Phase::kAborted);
    }
  }
}

// With more spare shares, reconstruction decodes: among 16 devices (t = 9, so 7 spare shares of
// each secret) three liars are corrected and named, more than leaving out two shares could
// explain. Four are beyond what 16 shares correct, and the round aborts rather than sum wrongly.
TEST(SecureAggregationRoundTest, DecodingCorrectsUpToHalfTheSpareSharesAndNamesTheLiars) {
  for (const std::uint32_t liars : {3u, 4u}) {
    SCOPED_TRACE(liars);
    Fleet fleet(16, 4, 0);
    fleet.stop_before_unmasking = true;
    ASSERT_TRUE(fleet.Run(Plan(13, 9, 4)).ok());
    for (std::uint32_t i = 0; i < 16; ++i) {
      const bool lies = i % 5 == 1 && i / 5 < liars;  // 1, 6, 11, then 16 is past the fleet
      if (!lies && !(liars == 4 && i == 15)) {
        ASSERT_TRUE(fleet.UnmaskDevice(i).ok());
        continue;
      }
      std::vector<std::uint32_t> survivors(16);
      const std::size_t count = fleet.server.SurvivorsFor(fleet.ids[i], survivors).value();
      std::vector<RevealedShare> revealed(16);
      const std::size_t written =
          fleet.clients[i].Unmask({survivors.data(), count}, revealed).value();
      for (std::size_t r = 0; r < written; ++r) revealed[r].share.y[5] ^= 0x01000000u;
      ASSERT_TRUE(fleet.server.AddUnmasking(fleet.ids[i], {revealed.data(), written}).ok());
    }
    if (liars == 3) {
      ASSERT_TRUE(fleet.server.Finish().ok());
      EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
      EXPECT_EQ(fleet.server.wrong_revealers(), 3u);
    } else {
      EXPECT_EQ(fleet.server.Finish().code(), StatusCode::kDataLoss);
    }
  }
}

TEST(SecureAggregationRoundTest, SparseNeighbourGraphSumsExactlyWithDropOuts) {
  // SecAgg+: 30 devices, 8 neighbours each (t = 6 of 9 holders).
  Fleet fleet(30, 64, 8);
  fleet.SilenceOnePerPhase({3, 17, 25, 29});
  ASSERT_TRUE(fleet.Run(Plan(11, 6, 64, 8)).ok());
  EXPECT_EQ(fleet.server.neighbourhood_size(), 8u);
  EXPECT_EQ(fleet.server.survivor_count(), 27u);
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

TEST(SecureAggregationRoundTest, ClientRefusesAThresholdThatWouldExposeIt) {
  Arenas arenas;
  Client client;
  ASSERT_TRUE(arenas.Init(client, ClientLimits{7, 2}).ok());
  KeyAdvertisement keys;
  ASSERT_TRUE(client.Start(1, 5, TestKey(13, 0), keys).ok());
  std::vector<RosterEntry> roster(3);
  for (std::uint32_t i = 0; i < 3; ++i) {
    roster[i].device = 10 + i;
    roster[i].share_point = 2 + i;
    roster[i].cipher_public = keys.cipher_public;
    roster[i].mask_public = keys.mask_public;
  }
  std::vector<SealedShares> out(3);
  Digest commitment;
  // 4 holders: t = 2 is not more than half.
  EXPECT_EQ(client.ShareKeys(2, 1, roster, commitment, out).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.phase(), Client::Phase::kAborted);
  ASSERT_TRUE(client.Start(2, 5, TestKey(13, 1), keys).ok());
  // One neighbour is fewer than the two this device requires.
  EXPECT_EQ(client.ShareKeys(2, 1, std::span(roster).first(1), commitment, out).status().code(),
            StatusCode::kOutOfRange);
}

TEST(SecureAggregationRoundTest, AMaskedInputLooksUniform) {
  // The input is all zeros (the most structured there is); its masked words must pass a
  // chi-square test for uniformity on their top byte and on their low byte.
  const std::uint32_t words = 1 << 16;
  Fleet fleet(3, words, 0);
  for (auto& input : fleet.inputs) std::fill(input.begin(), input.end(), 0u);
  ASSERT_TRUE(fleet.Run(Plan(12, 2, words)).ok());
  ASSERT_EQ(fleet.last_masked.size(), words);
  for (int shift : {24, 0}) {
    std::array<double, 256> counts{};
    for (std::uint32_t word : fleet.last_masked) counts[(word >> shift) & 0xFFu] += 1;
    const double expected = words / 256.0;
    double chi_square = 0;
    for (double c : counts) chi_square += (c - expected) * (c - expected) / expected;
    // 255 degrees of freedom: the 0.1 % critical value is 330.5.
    EXPECT_LT(chi_square, 330.5) << "shift " << shift;
  }
  EXPECT_EQ(fleet.Sum(), std::vector<std::uint32_t>(words, 0u));
}

TEST(SecureAggregationRoundTest, PackedVotesUnmaskToExactPerCoordinateCounts) {
  // Eight devices vote on 1,000 coordinates in 4-bit lanes (counts up to 8), eight lanes a word:
  // the server learns each coordinate's +1 count and nothing finer.
  constexpr std::uint32_t kDevices = 8;
  constexpr std::size_t kCoordinates = 1000;
  const std::uint32_t lane_bits = LaneBits(kDevices).value();
  ASSERT_EQ(lane_bits, 4u);
  const auto words = static_cast<std::uint32_t>(LaneWords(kCoordinates, lane_bits));
  ASSERT_EQ(words, 125u);
  Fleet fleet(kDevices, words, 0);
  std::vector<std::uint32_t> expected(kCoordinates, 0);
  for (std::uint32_t d = 0; d < kDevices; ++d) {
    std::vector<std::uint32_t> signs((kCoordinates + 31) / 32);
    for (std::size_t i = 0; i < kCoordinates; ++i) {
      const bool plus = ((i * 2654435761u) >> (d + 3)) & 1u;
      if (plus) signs[i / 32] |= 1u << (i % 32);
      expected[i] += plus ? 1u : 0u;
    }
    PackVotes(signs, kCoordinates, lane_bits, fleet.inputs[d]);
  }
  ASSERT_TRUE(fleet.Run(Plan(13, 5, words)).ok());
  std::vector<std::uint32_t> counts(kCoordinates);
  UnpackLaneSums(fleet.server.sum(), kCoordinates, lane_bits, counts);
  EXPECT_EQ(counts, expected);
}

TEST(SecureAggregationRoundTest, SharedScaleQsgdLevelsOfTheSurvivorsUnmaskToTheirSum) {
  // Eight devices quantize 600 values to 7 levels of a scale the server announced; lanes of
  // 7 bits hold 2 * 7 * 8. One device vanishes after sharing its keys: the sum decodes with the
  // survivors' offset.
  constexpr std::uint32_t kDevices = 8;
  constexpr std::size_t kCoordinates = 600;
  const SharedScaleLevels format = ChooseSharedScaleLevels(0.05f, 7, kDevices).value();
  const auto words = static_cast<std::uint32_t>(SharedScaleLevelWords(format, kCoordinates));
  ASSERT_EQ(words, 150u);
  Fleet fleet(kDevices, words, 0);
  fleet.SilenceFrom(kInputs, 6);
  std::vector<std::vector<float>> values(kDevices, std::vector<float>(kCoordinates));
  for (std::uint32_t d = 0; d < kDevices; ++d) {
    for (std::size_t i = 0; i < kCoordinates; ++i) {
      values[d][i] = 0.06f * std::cos(static_cast<float>(i) * 0.37f + static_cast<float>(d));
    }
    CounterRng dither(3, 13, 0, d);
    EncodeSharedScaleLevels(format, values[d], dither, fleet.inputs[d]);
  }
  ASSERT_TRUE(fleet.Run(Plan(14, 5, words)).ok());
  ASSERT_EQ(fleet.server.survivor_count(), kDevices - 1);
  std::vector<float> decoded(kCoordinates);
  DecodeSharedScaleLevelSum(format, fleet.server.sum(), kDevices - 1, decoded);
  // The same survivors' encodings summed in the clear decode to the same values.
  std::vector<float> plain(kCoordinates);
  DecodeSharedScaleLevelSum(format, fleet.ExpectedSum(), kDevices - 1, plain);
  EXPECT_EQ(decoded, plain);
  double worst = 0;
  for (std::size_t i = 0; i < kCoordinates; ++i) {
    double exact = 0;
    for (std::uint32_t d = 0; d < kDevices; ++d) {
      if (d != 6) exact += std::clamp(static_cast<double>(values[d][i]), -0.05, 0.05);
    }
    worst = std::max(worst, std::abs(static_cast<double>(decoded[i]) - exact));
  }
  EXPECT_LE(worst, (kDevices - 1) * 0.05 / 7 + 1e-6);  // at most a level per device
}

}  // namespace
}  // namespace edgesgd::secagg
