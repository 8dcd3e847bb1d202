// Whole secure-aggregation rounds between a ServerStage and DeviceStages whose every message
// travels as a wire frame (FrameBuilder::EncodeSecure, then DecodeFrame): exact sums with the full
// and the sparse neighbour graph, devices vanishing in each phase, too many vanishing, and
// messages out of phase or beyond the limits refused.

#include "edgesgd/secagg/frame_stage.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/wire_format.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

using namespace testing;  // NOLINT: the secure aggregation tests' shared helpers
using enum testing::Phase;

// A message through the wire: encoded into a frame and decoded from it again; counts the
// frame's bytes.
class Link {
 public:
  Link(std::size_t neighbours, std::size_t words)
      : storage_((wire::SecureFrameBytes(neighbours, words, neighbours + 1) +
                  wire::kBuilderScratchBytes) /
                     8 +
                 1),
        builder_(std::as_writable_bytes(std::span(storage_))) {}

  Result<wire::SecureView> Carry(std::uint32_t sender, std::uint32_t round,
                                 const wire::SecureMessage& message) {
    EDGESGD_TRY_ASSIGN(const std::span<const std::byte> frame,
                       builder_.EncodeSecure({sender, round, ++sequence_}, message));
    received_.assign(frame.size() / 8, 0);
    std::memcpy(received_.data(), frame.data(), frame.size());
    bytes_ += frame.size();
    EDGESGD_TRY_ASSIGN(const wire::FrameView view,
                       wire::DecodeFrame(std::as_bytes(std::span(received_))));
    if (view.kind != wire::MessageKind::kSecureAggregation) {
      return Status::Internal("the frame decodes to another message");
    }
    return view.secure;
  }

  std::size_t bytes() const { return bytes_; }

 private:
  std::vector<std::uint64_t> storage_;
  wire::FrameBuilder builder_;
  std::vector<std::uint64_t> received_;  // the last frame, as a receiver holds it
  std::uint64_t sequence_ = 0;
  std::size_t bytes_ = 0;
};

struct FrameFleet {
  FrameFleet(std::uint32_t n, std::uint32_t words, std::uint32_t neighbours)
      : ids(n),
        inputs(n, std::vector<std::uint32_t>(words)),
        devices(n),
        degree(NeighbourhoodSize(n, neighbours)),
        uplink(degree, words),
        downlink(degree, words) {
    for (std::uint32_t i = 0; i < n; ++i) {
      ids[i] = 10 + 3 * i;
      for (std::uint32_t w = 0; w < words; ++w) inputs[i][w] = (i + 7) * 2654435761u + w;
    }
    EXPECT_TRUE(arenas.Init(server, ServerLimits{n, degree, words}).ok());
    for (DeviceStage& device : devices) {
      EXPECT_TRUE(
          arenas
              .Init(device, DeviceStageLimits{{degree, std::min<std::uint32_t>(degree, 2)}, words})
              .ok());
    }
  }

  bool Speaks(std::uint32_t index, Phase phase) const {
    const auto found = silent_from.find(index);
    return found == silent_from.end() || found->second > phase;
  }

  // The device's answer to the server's message of the phase just closed, both through frames.
  Status Exchange(std::uint32_t i, std::uint32_t round) {
    EDGESGD_TRY_ASSIGN(const wire::SecureMessage to_device, server.MessageFor(ids[i]));
    EDGESGD_TRY_ASSIGN(const wire::SecureView delivered, downlink.Carry(0, round, to_device));
    EDGESGD_TRY_ASSIGN(const wire::SecureMessage answer, devices[i].Handle(delivered));
    if (answer.fields.phase == wire::SecurePhase::kMaskedInput) {
      masked_bytes += 4 * answer.masked.size();
    }
    EDGESGD_TRY_ASSIGN(const wire::SecureView received, uplink.Carry(ids[i], round, answer));
    return server.Add(ids[i], received);
  }

  Status Run(const RoundPlan& plan) {
    const auto round = static_cast<std::uint32_t>(plan.round);
    EDGESGD_TRY(server.Start(plan, ids));
    for (std::uint32_t i = 0; i < ids.size(); ++i) {
      if (!Speaks(i, kKeys)) continue;
      EDGESGD_TRY_ASSIGN(
          const wire::SecureMessage keys,
          devices[i].Start(plan.round, ids[i], TestKey(3, plan.round, i), inputs[i]));
      EDGESGD_TRY_ASSIGN(const wire::SecureView received, uplink.Carry(ids[i], round, keys));
      EDGESGD_TRY(server.Add(ids[i], received));
    }
    for (const Phase phase : {kShares, kInputs, kUnmasking}) {
      EDGESGD_TRY(server.Close());
      for (std::uint32_t i = 0; i < ids.size(); ++i) {
        if (Speaks(i, phase) && server.server().Expects(ids[i])) EDGESGD_TRY(Exchange(i, round));
      }
    }
    return server.Close();
  }

  std::vector<std::uint32_t> ExpectedSum() const {
    std::vector<std::uint32_t> sum(inputs[0].size(), 0);
    for (std::uint32_t i = 0; i < ids.size(); ++i) {
      if (!server.server().Survived(ids[i])) continue;
      for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += inputs[i][w];
    }
    return sum;
  }
  std::vector<std::uint32_t> Sum() const {
    const std::span<const std::uint32_t> sum = server.server().sum();
    return {sum.begin(), sum.end()};
  }

  std::vector<std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> inputs;
  Arenas arenas;  // before the stages it serves
  std::vector<DeviceStage> devices;
  ServerStage server;
  std::uint32_t degree;
  Link uplink;
  Link downlink;
  std::map<std::uint32_t, Phase> silent_from;
  std::size_t masked_bytes = 0;
};

TEST(SecureAggregationFrames, AWholeRoundThroughFramesSumsExactly) {
  FrameFleet fleet(8, 3181, 0);
  ASSERT_TRUE(fleet.Run(Plan(1, 6, 3181)).ok());
  EXPECT_EQ(fleet.server.server().survivor_count(), 8u);
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
  // The uplink's frames besides the masked words are the protocol's own (with their framing).
  const std::size_t protocol_up = (fleet.uplink.bytes() - fleet.masked_bytes) / 8;
  std::printf(
      "[secagg frames] 8 devices, 3181 words: per device %zu B of masked words, %zu B "
      "of uplink frames besides them, %zu B of downlink frames\n",
      fleet.masked_bytes / 8, protocol_up, fleet.downlink.bytes() / 8);
}

TEST(SecureAggregationFrames, TheSparseGraphSumsExactlyThroughFrames) {
  FrameFleet fleet(32, 64, 10);
  ASSERT_TRUE(fleet.Run(Plan(2, 8, 64, 10)).ok());
  EXPECT_EQ(fleet.server.server().neighbourhood_size(), 10u);
  EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum());
}

TEST(SecureAggregationFrames, ADeviceVanishingInAnyPhaseLeavesTheOthersExactSum) {
  for (const Phase phase : {kKeys, kShares, kInputs, kUnmasking}) {
    FrameFleet fleet(6, 40, 0);
    fleet.silent_from[2] = phase;
    ASSERT_TRUE(fleet.Run(Plan(3, 4, 40)).ok()) << "silent from phase " << phase;
    EXPECT_EQ(fleet.server.server().Survived(fleet.ids[2]), phase == kUnmasking);
    EXPECT_EQ(fleet.Sum(), fleet.ExpectedSum()) << "silent from phase " << phase;
  }
}

TEST(SecureAggregationFrames, TooManyVanishingDevicesAbortTheRound) {
  for (const Phase phase : {kKeys, kShares, kInputs, kUnmasking}) {
    FrameFleet fleet(5, 16, 0);
    fleet.silent_from[0] = phase;
    fleet.silent_from[1] = phase;
    fleet.silent_from[3] = phase;
    EXPECT_FALSE(fleet.Run(Plan(4, 3, 16)).ok()) << "silent from phase " << phase;
    EXPECT_EQ(fleet.server.server().phase(), Server::Phase::kAborted);
  }
}

TEST(SecureAggregationFrames, MessagesOutOfPhaseAreRefused) {
  FrameFleet fleet(3, 8, 0);
  const RoundPlan plan = Plan(5, 2, 8);
  ASSERT_TRUE(fleet.server.Start(plan, fleet.ids).ok());
  // Nothing is due before the keys are closed.
  EXPECT_EQ(fleet.server.MessageFor(fleet.ids[0]).status().code(), StatusCode::kFailedPrecondition);
  const Result<wire::SecureMessage> keys =
      fleet.devices[0].Start(plan.round, fleet.ids[0], TestKey(3, 5, 0), fleet.inputs[0]);
  ASSERT_TRUE(keys.ok());
  const Result<wire::SecureView> received = fleet.uplink.Carry(fleet.ids[0], 5, *keys);
  ASSERT_TRUE(received.ok());
  // A device never receives a device's message.
  EXPECT_EQ(fleet.devices[1].Handle(*received).status().code(), StatusCode::kInvalidArgument);
  // The server takes keys now, and a masked input only in its own phase.
  wire::SecureMessage early_input;
  early_input.fields.phase = wire::SecurePhase::kMaskedInput;
  early_input.masked = fleet.inputs[1];
  const Result<wire::SecureView> early = fleet.uplink.Carry(fleet.ids[1], 5, early_input);
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(fleet.server.Add(fleet.ids[1], *early).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fleet.server.Add(fleet.ids[0], *received).ok());
  EXPECT_EQ(fleet.server.Add(fleet.ids[0], *received).code(), StatusCode::kAlreadyExists);
  // An input of another length than the stage's.
  EXPECT_EQ(fleet.devices[2].Start(5, fleet.ids[2], TestKey(3, 5, 2), {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SecureAggregationFrames, ARosterBeyondTheDevicesLimitIsRefused) {
  Arenas arenas;
  DeviceStage device;
  ASSERT_TRUE(arenas.Init(device, DeviceStageLimits{{2, 1}, 4}).ok());
  const std::vector<std::uint32_t> input(4, 1);
  ASSERT_TRUE(device.Start(1, 7, TestKey(3, 1, 7), input).ok());
  std::vector<wire::SecureRosterRecord> roster(3);
  for (std::uint32_t i = 0; i < 3; ++i) roster[i] = {20 + i, 2 + i, {}, {}};
  wire::SecureMessage message;
  message.fields.phase = wire::SecurePhase::kRoster;
  message.fields.threshold = 2;
  message.fields.share_point = 1;
  message.roster = roster;
  Link link(3, 4);
  const Result<wire::SecureView> received = link.Carry(0, 1, message);
  ASSERT_TRUE(received.ok());
  EXPECT_EQ(device.Handle(*received).status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace edgesgd::secagg
