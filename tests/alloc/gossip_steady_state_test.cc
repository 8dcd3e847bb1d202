// Zero heap allocation in a GossipPeerSession's steady state: after Init, hundreds of rounds of
// D-PSGD, gradient tracking, DeTAG (accelerated gossip, several gradient calls per round) and
// CHOCO and BEER (top_k, sign and qsgd deltas into public copies, copies repaired after the
// silent peer's gap) on a ring of 4 (lossless rounds, deadline-closed rounds with a silent peer,
// rejected duplicate and malformed frames, event draining) must not call operator new or malloc
// once. The driver
// itself uses only storage allocated before counting starts.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/gossip_peer_session.h"

namespace edgesgd::protocol {
namespace {

constexpr std::uint32_t kPeers = 4;
constexpr std::uint32_t kRounds = 600;
constexpr std::uint32_t kWarmUpRounds = 10;
constexpr std::size_t kMailboxSlots = 32;
constexpr TimeNs kStep = 1'000'000;  // 1 ms per driver tick
constexpr TimeNs kDeadline = 5 * kStep;

Status Gradient(void* user, std::span<const float> point, std::uint32_t /*round*/,
                std::uint32_t /*local_step*/, std::span<float> gradient) {
  const float target = *static_cast<const float*>(user);
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - target;
  return Status::Ok();
}

struct Letter {
  PeerId from = 0;
  std::size_t size = 0;
  std::vector<std::uint64_t> words;  // sized before counting; 8-byte aligned frame storage
};

struct Mailbox {
  std::array<Letter, kMailboxSlots> letters;
  std::size_t count = 0;
};

void ExpectRoundsDoNotAllocate(GossipAlgorithm algorithm, std::uint32_t steps, float accel,
                               std::uint32_t batches, const CodecParams& codec = IdentityParams{},
                               float consensus_step = 1.0f) {
  const TensorLayout layout = TensorLayout::FromSizes(std::array<std::uint64_t, 3>{300, 41, 700})
                                  .value();
  const Topology ring{TopologyKind::kRing, kPeers};
  std::vector<std::unique_ptr<GossipPeerSession>> sessions;
  std::vector<std::vector<std::byte>> storage(kPeers + 1);
  std::vector<std::unique_ptr<Arena>> arenas(kPeers + 1);
  std::array<float, kPeers + 1> targets{};
  std::vector<float> initial(layout.dimension(), 0.5f);
  std::size_t frame_bytes = 0;
  sessions.resize(kPeers + 1);
  for (PeerId id = 1; id <= kPeers; ++id) {
    GossipConfig config;
    config.mixing = MakeMixingRow(ring, MixingRule::kMetropolisHastings, id).value();
    config.layout = layout;
    config.rounds = kRounds;
    config.learning_rate = 0.05f;
    config.neighbour_deadline_ns = kDeadline;
    config.algorithm = algorithm;
    config.gossip_steps = steps;
    config.accel = accel;
    config.phase_batches = batches;
    config.codec = codec;
    config.consensus_step = consensus_step;
    frame_bytes = GossipPeerSession::MaxFrameBytes(config);
    storage[id].resize(GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
    arenas[id] = std::make_unique<Arena>(storage[id]);
    targets[id] = static_cast<float>(id);
    GossipOptions options;
    options.gradient = &Gradient;
    options.user = &targets[id];
    options.initial_model = initial;
    options.codecs = &AllCodecs();
    sessions[id] = std::make_unique<GossipPeerSession>();
    ASSERT_TRUE(sessions[id]->Init(*arenas[id], config, options).ok());
    arenas[id]->Seal();
  }
  std::vector<Mailbox> mailboxes(kPeers + 1);
  for (Mailbox& box : mailboxes) {
    for (Letter& letter : box.letters) letter.words.resize(frame_bytes / 8 + 1);
  }
  std::vector<std::uint64_t> garbage(8, 0x5A5A5A5A5A5A5A5Aull);

  TimeNs now = 0;
  std::size_t before = 0;
  bool counting = false;
  const auto drain = [&](PeerId id) {
    OutgoingFrame out;
    // Rounds 100..199: peer 3 is silent, so peers 2 and 4 close every round at the deadline.
    const std::uint32_t round = sessions[1]->round();
    const bool silent = id == 3 && round >= 100 && round < 200;
    while (sessions[id]->PollFrame(out)) {
      if (silent) continue;
      Mailbox& box = mailboxes[out.to];
      // Each neighbour's latest frame twice in rounds 300..: one is counted as a duplicate.
      const int copies = round >= 300 ? 2 : 1;
      for (int c = 0; c < copies && box.count < kMailboxSlots; ++c) {
        Letter& letter = box.letters[box.count++];
        letter.from = id;
        letter.size = out.bytes.size();
        std::memcpy(letter.words.data(), out.bytes.data(), out.bytes.size());
      }
    }
    GossipRoundEvent round_event;
    while (sessions[id]->PollRoundEvent(round_event)) {
    }
    GossipRejectEvent reject_event;
    while (sessions[id]->PollRejectEvent(reject_event)) {
    }
  };

  for (PeerId id = 1; id <= kPeers; ++id) {
    sessions[id]->Start(now);
    drain(id);
  }
  bool all_finished = false;
  for (int tick = 0; tick < 100000 && !all_finished; ++tick) {
    if (!counting && sessions[1]->round() >= kWarmUpRounds) {
      counting = true;
      before = testing::HeapAllocationCount();
    }
    now += kStep;
    for (PeerId id = 1; id <= kPeers; ++id) {
      Mailbox& box = mailboxes[id];
      const std::size_t count = box.count;
      box.count = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const Letter& letter = box.letters[i];
        const std::span<const std::byte> bytes(
            reinterpret_cast<const std::byte*>(letter.words.data()), letter.size);
        sessions[id]->OnFrame(letter.from, bytes, now);
      }
      sessions[id]->OnFrame(id == 1 ? 2 : 1,
                            std::span<const std::byte>(
                                reinterpret_cast<const std::byte*>(garbage.data()), 64),
                            now);
      if (now >= sessions[id]->NextWakeup()) sessions[id]->OnTimer(now);
      drain(id);
    }
    all_finished = true;
    for (PeerId id = 1; id <= kPeers; ++id) all_finished = all_finished && sessions[id]->Finished();
  }
  const std::size_t allocations = testing::HeapAllocationCount() - before;
  ASSERT_TRUE(counting);
  ASSERT_TRUE(all_finished);
  EXPECT_EQ(allocations, 0u);
  EXPECT_GT(sessions[2]->counters().deadline_closes, 50u);
  EXPECT_GT(sessions[2]->counters().rejected_for(GossipRejectReason::kDuplicate), 100u);
  EXPECT_GT(sessions[2]->counters().rejected_for(GossipRejectReason::kMalformed), 100u);
  if (CompressesGossip(algorithm)) {  // the silent peer's gap was repaired from its copies
    EXPECT_GT(sessions[2]->counters().copies_applied, 0u);
  }
}

TEST(GossipSteadyStateTest, DpsgdRoundsDoNotAllocate) {
  ExpectRoundsDoNotAllocate(GossipAlgorithm::kDpsgd, 1, 0.0f, 1);
}

TEST(GossipSteadyStateTest, GradientTrackingRoundsDoNotAllocate) {
  ExpectRoundsDoNotAllocate(GossipAlgorithm::kGradientTracking, 1, 0.0f, 1);
}

TEST(GossipSteadyStateTest, DetagRoundsDoNotAllocate) {
  ExpectRoundsDoNotAllocate(GossipAlgorithm::kDetag, 3, 0.3f, 2);
}

// A compressed algorithm (CHOCO, BEER) with top_k, sign (two phase batches) and DQ-scheduled
// QSGD.
void ExpectCompressedRoundsDoNotAllocate(GossipAlgorithm algorithm) {
  ExpectRoundsDoNotAllocate(algorithm, 1, 0.0f, 1, TopKParams{.k_ratio = 0.05f}, 0.1f);
  ExpectRoundsDoNotAllocate(algorithm, 1, 0.0f, 2, SignParams{}, 0.1f);
  ExpectRoundsDoNotAllocate(algorithm, 1, 0.0f, 1,
                            QsgdParams{.schedule = QuantScheduleKind::kDq, .bits_min = 6}, 0.5f);
}

TEST(GossipSteadyStateTest, ChocoRoundsDoNotAllocate) {
  ExpectCompressedRoundsDoNotAllocate(GossipAlgorithm::kChoco);
}

TEST(GossipSteadyStateTest, BeerRoundsDoNotAllocate) {
  ExpectCompressedRoundsDoNotAllocate(GossipAlgorithm::kBeer);
}

}  // namespace
}  // namespace edgesgd::protocol
