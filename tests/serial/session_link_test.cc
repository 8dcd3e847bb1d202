// A protocol session over the serial link (edgesgd/serial/session_link.h). First with a scripted
// session, to see what SessionLink itself does: it polls the session only when the link can take
// a frame, drops frames too large or for another peer, hands payloads up aligned and from the
// remote, and turns far-end restarts and link failures into peer losses. Then a real worker
// trains over a serial line to a gateway (played by the test) that feeds a real server: on a
// clear line, through lost, corrupted and repeated bytes, across a gateway restart and across a
// cut line, the run completes with the model of the same run connected directly.

#include "edgesgd/serial/session_link.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::serial {
namespace {

namespace harness = protocol::testing;
using Bytes = std::vector<std::byte>;
using protocol::PeerId;

constexpr TimeNs kMs = 1'000'000;
constexpr TimeNs kSecond = 1000 * kMs;
constexpr std::size_t kChunk = 64;  // bytes per millisecond each way: a 640 kbit/s line

bool Aligned(std::span<const std::byte> frame) {
  return reinterpret_cast<std::uintptr_t>(frame.data()) % wire::kFrameAlignment == 0;
}

// Bytes on their way in one direction, with faults drawn per byte.
struct Channel {
  explicit Channel(std::uint32_t seed) : engine(seed) {}

  void Carry(std::span<const std::byte> written) {
    std::uniform_real_distribution<double> draw(0.0, 1.0);
    for (std::byte b : written) {
      if (cut || draw(engine) < loss) continue;
      if (draw(engine) < corruption) {
        b ^= std::byte{static_cast<std::uint8_t>(1u << (engine() % 8))};
      }
      bytes.push_back(b);
      if (draw(engine) < duplication) bytes.push_back(b);
    }
  }
  Bytes Take(std::size_t most) {
    const auto n = static_cast<std::ptrdiff_t>(std::min(most, bytes.size()));
    Bytes taken(bytes.begin(), bytes.begin() + n);
    bytes.erase(bytes.begin(), bytes.begin() + n);
    return taken;
  }

  std::deque<std::byte> bytes;
  double loss = 0;
  double corruption = 0;
  double duplication = 0;
  bool cut = false;  // the cable is unplugged: everything is lost
  std::mt19937 engine;
};

// One millisecond of writing: up to kChunk bytes of each end's output onto its channel.
void WriteBothEnds(SessionLink& device, Link& far, Channel& to_far, Channel& to_device,
                   TimeNs now) {
  std::span<const std::byte> out = device.Output();
  std::size_t n = std::min(out.size(), kChunk);
  to_far.Carry(out.first(n));
  device.Written(n, now);
  out = far.Output();
  n = std::min(out.size(), kChunk);
  to_device.Carry(out.first(n));
  far.Written(n);
}

// ---- SessionLink on its own, over a scripted session ----

constexpr PeerId kRemote = 5;
constexpr std::size_t kMaxFrame = 96;

// Hands out the frames of its script one PollFrame at a time and records what it is told.
class ScriptedSession final : public protocol::Session {
 public:
  struct Frame {
    PeerId to;
    std::size_t bytes;
  };

  void Start(TimeNs) override { ++starts; }
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs) override {
    froms.push_back(from);
    received.emplace_back(frame.begin(), frame.end());
    if (!Aligned(frame)) ++misaligned;
  }
  void OnPeerLost(PeerId peer, TimeNs) override { lost.push_back(peer); }
  void OnTimer(TimeNs now) override {
    timer_calls.push_back(now);
    wakeup = protocol::kNever;
  }
  bool PollFrame(protocol::OutgoingFrame& out) override {
    // SessionLink asks only when the link can take the frame at once.
    if (link != nullptr && !link->link().CanSend()) ++polls_while_busy;
    if (script.empty()) return false;
    const Frame frame = script.front();
    script.pop_front();
    storage.assign(frame.bytes, static_cast<std::byte>(frame.bytes & 0xFFu));
    out.to = frame.to;
    out.bytes = storage;
    return true;
  }
  TimeNs NextWakeup() const override { return wakeup; }
  bool Finished() const override { return finished; }

  const SessionLink* link = nullptr;
  std::deque<Frame> script;
  Bytes storage;
  int starts = 0;
  int polls_while_busy = 0;
  int misaligned = 0;
  std::vector<PeerId> froms;
  std::vector<Bytes> received;
  std::vector<PeerId> lost;
  std::vector<TimeNs> timer_calls;
  TimeNs wakeup = protocol::kNever;
  bool finished = false;
};

// A SessionLink over a scripted session, on a clear line to a plain Link.
struct ScriptedPair {
  explicit ScriptedPair(const LinkOptions& options = {.retransmit_ns = 20 * kMs, .max_attempts = 5})
      : device_memory(SessionLink::BufferBytes(kMaxFrame)),
        far_memory(Link::BufferBytes(SessionLink::LinkPayloadBytes(kMaxFrame))) {
    session.link = &device;
    EXPECT_TRUE(device.Init(device_memory, kMaxFrame, session, kRemote, options).ok());
    EXPECT_TRUE(far.Init(far_memory, SessionLink::LinkPayloadBytes(kMaxFrame), options).ok());
  }

  void Start() {
    device.Start(now, 1);
    far.Start(now, 2);
  }

  // `steps` milliseconds: bytes both ways, then timers.
  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      WriteBothEnds(device, far, to_far, to_device, now);
      const Bytes arrived = to_far.Take(kChunk);
      std::span<const std::byte> rest(arrived);
      while (!rest.empty()) {
        const FrameDecoder::Step got = far.Receive(rest);
        if (got.delivered) far_received.emplace_back(got.frame.begin(), got.frame.end());
        rest = rest.subspan(got.consumed);
      }
      device.Receive(to_device.Take(kChunk), now);
      now += kMs;
      if (device.NextWakeup() <= now) device.OnTimer(now);
      if (far.NextWakeup() <= now) far.OnTimer(now);
    }
  }

  TimeNs now = 0;
  ScriptedSession session;
  Bytes device_memory;
  SessionLink device;
  Bytes far_memory;
  Link far;
  std::vector<Bytes> far_received;
  Channel to_far{1};
  Channel to_device{2};
};

TEST(SessionLinkTest, FramesWaitInTheSessionUntilTheLinkCanTakeThem) {
  ScriptedPair pair;
  pair.session.script = {{kRemote, 10}, {kRemote, 20}, {kRemote, 30}};
  pair.Start();
  EXPECT_EQ(pair.session.starts, 1);
  // The handshake is not done: nothing was taken from the session.
  EXPECT_EQ(pair.session.script.size(), 3u);
  EXPECT_EQ(pair.device.counters().frames_sent, 0u);
  // Handshake and the first frame on its way, unacknowledged: the other two stay in the session.
  pair.Run(1);
  pair.Run(1);
  EXPECT_EQ(pair.device.link().state(), LinkState::kReady);
  EXPECT_EQ(pair.device.counters().frames_sent, 1u);
  EXPECT_EQ(pair.session.script.size(), 2u);
  pair.Run(20);
  ASSERT_EQ(pair.far_received.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(pair.far_received[i], Bytes(10 * (i + 1), static_cast<std::byte>(10 * (i + 1))));
  }
  EXPECT_EQ(pair.device.counters().frames_sent, 3u);
  EXPECT_EQ(pair.session.polls_while_busy, 0);
  EXPECT_EQ(pair.device.link().counters().retransmissions, 0u);
}

TEST(SessionLinkTest, FramesTooLargeOrForAnotherPeerAreDroppedAndCounted) {
  ScriptedPair pair;
  pair.session.script = {{kRemote, 32},
                         {kRemote + 1, 16},
                         {kRemote, kMaxFrame + 1},
                         {protocol::kServerPeer, 8},
                         {kRemote, kMaxFrame}};
  pair.Start();
  pair.Run(30);
  ASSERT_EQ(pair.far_received.size(), 2u);
  EXPECT_EQ(pair.far_received[0].size(), 32u);
  EXPECT_EQ(pair.far_received[1].size(), kMaxFrame);
  EXPECT_EQ(pair.device.counters().frames_sent, 2u);
  EXPECT_EQ(pair.device.counters().frames_too_large, 1u);
  EXPECT_EQ(pair.device.counters().frames_misrouted, 2u);
  EXPECT_TRUE(pair.session.script.empty());
}

TEST(SessionLinkTest, PayloadsReachTheSessionAlignedAndFromTheRemote) {
  // Memory one byte off an 8-byte boundary: the link aligns the payloads all the same.
  std::vector<std::uint64_t> words(SessionLink::BufferBytes(kMaxFrame) / 8 + 2);
  ScriptedPair pair;
  ASSERT_TRUE(pair.device
                  .Init(std::as_writable_bytes(std::span(words))
                            .subspan(1, SessionLink::BufferBytes(kMaxFrame)),
                        kMaxFrame, pair.session, kRemote)
                  .ok());
  pair.Start();
  pair.Run(5);
  for (std::size_t size : {1u, 8u, 33u, 96u}) {
    ASSERT_TRUE(pair.far.Send(Bytes(size, std::byte{0x5A}), pair.now).ok());
    pair.Run(5);
  }
  ASSERT_EQ(pair.session.received.size(), 4u);
  EXPECT_EQ(pair.session.received[2], Bytes(33, std::byte{0x5A}));
  EXPECT_EQ(pair.session.froms, std::vector<PeerId>(4, kRemote));
  EXPECT_EQ(pair.session.misaligned, 0);
  EXPECT_EQ(pair.device.counters().frames_received, 4u);
}

TEST(SessionLinkTest, EachFarEndRestartIsOnePeerLoss) {
  ScriptedPair pair;
  pair.Start();
  pair.Run(5);
  EXPECT_TRUE(pair.session.lost.empty());
  pair.far.Start(pair.now, 3);
  pair.Run(5);
  EXPECT_EQ(pair.session.lost, std::vector<PeerId>{kRemote});
  pair.far.Start(pair.now, 4);
  pair.Run(5);
  EXPECT_EQ(pair.session.lost, std::vector<PeerId>(2, kRemote));
  EXPECT_EQ(pair.device.counters().peer_restarts, 2u);
  EXPECT_EQ(pair.device.counters().link_restarts, 0u);
  // The link works on with the far end's new life.
  pair.session.script = {{kRemote, 12}};
  pair.Run(5);
  ASSERT_EQ(pair.far_received.size(), 1u);
  EXPECT_EQ(pair.far_received[0].size(), 12u);
}

TEST(SessionLinkTest, AFailedLinkIsAPeerLossAndStartsAgainWithTheNextNonce) {
  ScriptedPair pair;  // 5 attempts, 20 ms apart
  pair.Start();
  pair.Run(5);
  pair.to_far.cut = true;
  pair.session.script = {{kRemote, 40}};
  // Sent at 5 ms and again at 25, 45, 65 and 85 ms; at 105 ms the fifth attempt's time is up.
  pair.Run(99);
  EXPECT_EQ(pair.device.counters().link_restarts, 0u);
  EXPECT_EQ(pair.device.link().counters().retransmissions, 4u);
  pair.Run(1);
  EXPECT_EQ(pair.device.counters().link_restarts, 1u);
  EXPECT_EQ(pair.session.lost, std::vector<PeerId>{kRemote});
  EXPECT_EQ(pair.device.link().state(), LinkState::kSyncing);
  // Back on the line, the far end learns the new nonce (2, after 1) as a restart of ours.
  pair.to_far.cut = false;
  pair.session.script = {{kRemote, 24}};
  pair.Run(30);
  EXPECT_EQ(pair.device.link().state(), LinkState::kReady);
  EXPECT_EQ(pair.far.counters().peer_restarts, 1u);
  ASSERT_FALSE(pair.far_received.empty());
  EXPECT_EQ(pair.far_received.back().size(), 24u);
  EXPECT_EQ(pair.device.counters().peer_restarts, 0u);
}

TEST(SessionLinkTest, TimersOfTheLinkAndTheSessionBothDrive) {
  ScriptedPair pair;
  pair.session.wakeup = 7 * kMs;
  pair.Start();
  // The link's kSync retransmission (20 ms) is later than the session's wake-up.
  EXPECT_EQ(pair.device.NextWakeup(), 7 * kMs);
  pair.device.OnTimer(6 * kMs);
  EXPECT_TRUE(pair.session.timer_calls.empty());
  pair.device.OnTimer(7 * kMs);
  EXPECT_EQ(pair.session.timer_calls, std::vector<TimeNs>{7 * kMs});
  EXPECT_EQ(pair.device.NextWakeup(), 20 * kMs);
  pair.device.OnTimer(20 * kMs);
  EXPECT_EQ(pair.device.link().counters().retransmissions, 1u);
  EXPECT_EQ(pair.session.timer_calls.size(), 1u);
}

TEST(SessionLinkTest, FinishedOnlyOnceTheLinkIsIdle) {
  ScriptedPair pair;
  pair.Start();
  pair.Run(5);
  pair.session.script = {{kRemote, 64}};
  pair.session.finished = true;
  pair.device.OnTimer(pair.now);  // an entry point: the last frame goes to the link
  EXPECT_FALSE(pair.device.Finished());
  pair.Run(10);
  EXPECT_EQ(pair.far_received.size(), 1u);
  EXPECT_TRUE(pair.device.Finished());
}

TEST(SessionLinkTest, InitChecksItsArguments) {
  ScriptedSession session;
  SessionLink link;
  EXPECT_FALSE(link.Finished());
  EXPECT_EQ(link.NextWakeup(), kNever);
  Bytes memory(SessionLink::BufferBytes(kMaxFrame));
  EXPECT_EQ(link.Init(memory, 0, session, kRemote).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      link.Init(std::span(memory).first(memory.size() - 1), kMaxFrame, session, kRemote).code(),
      StatusCode::kResourceExhausted);
  EXPECT_EQ(link.Init(memory, kMaxFrame, session, kRemote, {.max_attempts = 0}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(link.Init(memory, kMaxFrame, session, kRemote, {.retransmit_ns = 0}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(link.Init(memory, kMaxFrame, session, kRemote).ok());
  link.Start(0, 1);
  EXPECT_EQ(session.starts, 1);
}

// ---- Authentication of the line ----

constexpr std::uint32_t kDevice = 7;

std::array<std::byte, auth::kKeyBytes> Key(std::uint8_t fill) {
  std::array<std::byte, auth::kKeyBytes> key{};
  key.fill(std::byte{fill});
  return key;
}

// The gateway's end of an authenticated line, played by the test over ScriptedPair's far link:
// it answers each device hello and opens the records that follow.
struct AuthenticatedPair : ScriptedPair {
  explicit AuthenticatedPair(std::uint8_t gateway_key = 0x42) {
    EXPECT_TRUE(device_keys.Add(kDevice, Key(0x42)).ok());
    EXPECT_TRUE(gateway_keys.Add(kDevice, Key(gateway_key)).ok());
    EXPECT_TRUE(device_auth.Init(kMaxFrame).ok());
    EXPECT_TRUE(gateway.Init(kMaxFrame).ok());
    boot_nonce.fill(std::byte{0x11});
    EXPECT_TRUE(device.EnableAuthentication(device_auth, device_keys, kDevice, boot_nonce).ok());
  }

  // Runs `steps` milliseconds, the gateway answering hellos and opening records as they come.
  void Exchange(int steps) {
    for (int step = 0; step < steps; ++step) {
      const std::size_t seen = far_received.size();
      Run(1);
      for (std::size_t i = seen; i < far_received.size(); ++i) Handle(far_received[i]);
    }
  }

  void Handle(const Bytes& payload) {
    // A device that restarted its link starts a new connection, as a gateway sees it.
    if (far.counters().peer_restarts != restarts_seen) {
      restarts_seen = far.counters().peer_restarts;
      gateway.Reset();
    }
    if (!gateway.established()) {
      hellos.push_back(payload);
      std::array<std::byte, auth::kNonceBytes> nonce{};
      nonce.fill(static_cast<std::byte>(hellos.size()));
      std::array<std::byte, auth::kResponderHelloBytes> hello{};
      ASSERT_TRUE(gateway.StartResponder(gateway_keys, payload, nonce, hello).ok());
      pending.emplace_back(hello.begin(), hello.end());
    } else {
      const Result<std::span<const std::byte>> frame = gateway.Open(payload);
      ASSERT_TRUE(frame.ok()) << frame.status().reason();
      opened.emplace_back(frame->begin(), frame->end());
    }
    SendPending();
  }

  // Sends the gateway's queued payloads while its link takes them.
  void SendPending() {
    while (!pending.empty() && far.CanSend()) {
      ASSERT_TRUE(far.Send(pending.front(), now).ok());
      pending.pop_front();
    }
  }

  // A frame from the gateway, sealed as its next record.
  Bytes Seal(const Bytes& frame) {
    Bytes record(auth::RecordBytes(frame.size()));
    const Result<std::span<const std::byte>> sealed = gateway.Seal(frame, record);
    EXPECT_TRUE(sealed.ok());
    return record;
  }

  auth::FixedKeyRing<1> device_keys;
  auth::FixedKeyRing<1> gateway_keys;
  auth::ConnectionAuth device_auth;
  auth::ConnectionAuth gateway;
  std::array<std::byte, auth::kNonceBytes> boot_nonce{};
  std::vector<Bytes> hellos;  // device hellos, in order
  std::vector<Bytes> opened;  // frames of the device's records
  std::deque<Bytes> pending;  // gateway payloads waiting for the link
  std::uint64_t restarts_seen = 0;
};

TEST(SessionLinkAuthTest, TheHelloGoesFirstAndFramesTravelAsRecordsBothWays) {
  AuthenticatedPair pair;
  pair.session.script = {{kRemote, 10}, {kRemote, kMaxFrame}};
  pair.Start();
  for (int step = 0; step < 20 && pair.hellos.empty(); ++step) pair.Exchange(1);
  // The hello is out, the gateway's answer not yet in: the session has not been polled.
  ASSERT_EQ(pair.hellos.size(), 1u);
  EXPECT_EQ(pair.hellos[0].size(), auth::kInitiatorHelloBytes);
  EXPECT_EQ(pair.session.script.size(), 2u);
  pair.Exchange(40);
  EXPECT_TRUE(pair.device_auth.established());
  ASSERT_EQ(pair.opened.size(), 2u);
  EXPECT_EQ(pair.opened[0], Bytes(10, std::byte{10}));
  EXPECT_EQ(pair.opened[1], Bytes(kMaxFrame, static_cast<std::byte>(kMaxFrame)));
  // The records on the line are the frames with their header and tag around them.
  EXPECT_EQ(pair.far_received[1].size(), auth::RecordBytes(10));

  pair.pending.push_back(pair.Seal(Bytes(33, std::byte{0x5A})));
  pair.SendPending();
  pair.Exchange(10);
  ASSERT_EQ(pair.session.received.size(), 1u);
  EXPECT_EQ(pair.session.received[0], Bytes(33, std::byte{0x5A}));
  EXPECT_EQ(pair.session.misaligned, 0);
  EXPECT_EQ(pair.device.counters().auth_rejected, 0u);
}

TEST(SessionLinkAuthTest, ARecordThatFailsRestartsTheLinkWithANewConnection) {
  AuthenticatedPair pair;
  pair.Start();
  pair.Exchange(20);
  ASSERT_TRUE(pair.device_auth.established());
  const Bytes first = pair.Seal(Bytes(16, std::byte{1}));
  pair.pending.push_back(first);
  pair.SendPending();
  pair.Exchange(10);
  ASSERT_EQ(pair.session.received.size(), 1u);

  // The same record again (a replay) fails: the device counts it and ignores the line for
  // kAuthRetryNs; then its session loses the gateway and the link starts again with a hello
  // under a fresh nonce.
  ASSERT_TRUE(pair.far.Send(first, pair.now).ok());
  pair.Exchange(10);
  EXPECT_EQ(pair.device.counters().auth_rejected, 1u);
  EXPECT_TRUE(pair.session.lost.empty());
  EXPECT_EQ(pair.hellos.size(), 1u);
  pair.Exchange(static_cast<int>(SessionLink::kAuthRetryNs / kMs) + 30);
  EXPECT_EQ(pair.session.lost, std::vector<PeerId>{kRemote});
  EXPECT_EQ(pair.session.received.size(), 1u);
  ASSERT_EQ(pair.hellos.size(), 2u);
  EXPECT_NE(pair.hellos[0], pair.hellos[1]);
  EXPECT_TRUE(pair.device_auth.established());

  // An altered record fails as well.
  Bytes altered = pair.Seal(Bytes(16, std::byte{2}));
  altered[auth::kRecordHeaderBytes] ^= std::byte{1};
  ASSERT_TRUE(pair.far.Send(altered, pair.now).ok());
  pair.Exchange(static_cast<int>(SessionLink::kAuthRetryNs / kMs) + 40);
  EXPECT_EQ(pair.device.counters().auth_rejected, 2u);
  EXPECT_EQ(pair.session.received.size(), 1u);
  EXPECT_EQ(pair.hellos.size(), 3u);
}

TEST(SessionLinkAuthTest, AGatewayWithoutTheKeyNeverGetsAFrame) {
  AuthenticatedPair pair(/*gateway_key=*/0x43);
  pair.session.script = {{kRemote, 10}};
  pair.Start();
  pair.Exchange(static_cast<int>(3 * SessionLink::kAuthRetryNs / kMs));
  // Every answer fails the key confirmation; the device tries again once a second, and sends
  // no frame.
  EXPECT_EQ(pair.device.counters().auth_rejected, 3u);
  EXPECT_EQ(pair.hellos.size(), 3u);
  EXPECT_TRUE(pair.opened.empty());
  EXPECT_EQ(pair.session.script.size(), 1u);
  EXPECT_EQ(pair.device.counters().frames_sent, 0u);
}

TEST(SessionLinkAuthTest, EnableAuthenticationChecksItsArguments) {
  ScriptedPair pair;
  auth::FixedKeyRing<1> keys;
  ASSERT_TRUE(keys.Add(kDevice, Key(0x42)).ok());
  auth::ConnectionAuth small;
  ASSERT_TRUE(small.Init(kMaxFrame - 1).ok());
  auth::ConnectionAuth enough;
  ASSERT_TRUE(enough.Init(kMaxFrame).ok());
  const std::array<std::byte, auth::kNonceBytes> nonce{};
  EXPECT_EQ(pair.device.EnableAuthentication(enough, keys, kDevice + 1, nonce).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(pair.device.EnableAuthentication(small, keys, kDevice, nonce).code(),
            StatusCode::kInvalidArgument);
  pair.Start();
  EXPECT_EQ(pair.device.EnableAuthentication(enough, keys, kDevice, nonce).code(),
            StatusCode::kFailedPrecondition);
}

// ---- A worker over a serial line, a gateway and a server ----

constexpr PeerId kWorker = 1;
constexpr std::uint32_t kRounds = 20;
constexpr std::size_t kDimension = 64;
// A frame of up to 640 bytes takes 10 ms to write; an acknowledgement may queue behind one.
constexpr LinkOptions kLineOptions{.retransmit_ns = 50 * kMs, .max_attempts = 8};

protocol::RunConfig Config() {
  return harness::MeanConfig(kDimension, kCodecId<TopKCodec>, kRounds);  // top-k, EF
}
protocol::ServerOptions OneWorker() {
  protocol::ServerOptions options;
  options.workers = 1;
  options.quorum = 1;
  return options;
}
std::vector<float> InitialModel() { return harness::PseudoRandom(kDimension, 9, 2.0f); }
std::vector<float> Target() { return harness::Targets(1, kDimension)[0]; }
std::size_t MaxFrameBytes() {
  return std::max(protocol::BroadcastFrameBytes(Config()), protocol::UpdateFrameBytes(Config()));
}

// The same run with the worker connected to the server directly (the protocol tests' network):
// the models a serial run must end with.
struct Models {
  std::vector<float> server;
  std::vector<float> worker;
};
const Models& DirectRunModels() {
  static const Models models = [] {
    harness::Cluster cluster(Config(), OneWorker(), {Target()}, InitialModel());
    cluster.net().SetLatencyAll(kMs);
    cluster.Start();
    EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    EXPECT_EQ(cluster.server().round(), kRounds);
    return Models{{cluster.server().model().begin(), cluster.server().model().end()},
                  {cluster.worker(kWorker).model().begin(), cluster.worker(kWorker).model().end()}};
  }();
  return models;
}

// The device (a WorkerSession over a SessionLink) and the gateway: a plain Link whose payloads
// the test hands to the server as worker 1's frames, and whose frames to worker 1 it queues and
// sends as the link takes them.
class SerialRun {
  // The memory of the sessions and links, declared first so that it outlives them.
  harness::ArenaStorage server_storage_;
  harness::QuadraticProblem problem_;
  harness::ArenaStorage worker_storage_;
  Bytes device_memory_;
  Bytes gateway_memory_;

 public:
  explicit SerialRun(const LinkOptions& line_options = kLineOptions)
      : server_storage_(protocol::ServerSession::ArenaBytes(Config(), OneWorker())),
        worker_storage_(protocol::WorkerSession::ArenaBytes(Config())),
        device_memory_(SessionLink::BufferBytes(MaxFrameBytes())),
        gateway_memory_(Link::BufferBytes(MaxFrameBytes())),
        inbox_((MaxFrameBytes() + 7) / 8) {
    const std::vector<float> initial = InitialModel();
    const Status server_init =
        server.Init(server_storage_.arena, AllCodecs(), Config(), OneWorker(), initial);
    EXPECT_TRUE(server_init.ok()) << server_init.reason();
    problem_.target = Target();
    protocol::WorkerOptions options;
    options.device_id = kWorker;
    options.gradient = &harness::QuadraticGradient;
    options.user = &problem_;
    options.codecs = &AllCodecs();
    // Frequent heartbeats keep the device's link busy, so that a cut line makes it fail.
    options.heartbeat_interval_ns = 50 * kMs;
    const Status worker_init = worker.Init(worker_storage_.arena, options);
    EXPECT_TRUE(worker_init.ok()) << worker_init.reason();
    EXPECT_TRUE(
        device.Init(device_memory_, MaxFrameBytes(), worker, protocol::kServerPeer, line_options)
            .ok());
    EXPECT_TRUE(gateway.Init(gateway_memory_, MaxFrameBytes(), line_options).ok());
  }

  void Start() {
    server.Start(now);
    DrainServer();
    device.Start(now, 100);
    gateway.Start(now, gateway_nonce_);
  }

  // The gateway lost its state and reconnected to the server: a fresh link, its queue gone, and
  // the server saw the worker's connection drop.
  void RestartGateway() {
    gateway.Start(now, ++gateway_nonce_);
    to_device_.clear();
    server.OnPeerLost(kWorker, now);
    DrainServer();
  }

  template <typename Done>
  bool RunUntil(Done done, TimeNs limit) {
    while (!done()) {
      if (now > limit || !Step()) return done();
    }
    return true;
  }
  bool RunFor(TimeNs duration) {
    const TimeNs until = now + duration;
    return RunUntil([&] { return now >= until; }, until);
  }
  // Until the server ran every round and both ends have nothing left to send.
  bool RunToEnd(TimeNs limit) {
    return RunUntil(
        [&] {
          return server.Finished() && device.Finished() && gateway.Idle() && to_device_.empty();
        },
        limit);
  }

  TimeNs now = 0;
  protocol::ServerSession server;
  protocol::WorkerSession worker;
  SessionLink device;
  Link gateway;
  Channel up{11};    // device to gateway
  Channel down{12};  // gateway to device
  std::uint64_t gateway_restarts = 0;

 private:
  // A millisecond: up to kChunk bytes each way, then the timers due. A quiet line (nothing to
  // write, nothing travelling) jumps to the next wake-up. False when nothing is left to wait for.
  bool Step() {
    FeedGateway();
    WriteBothEnds(device, gateway, up, down, now);
    FeedGateway();
    GatewayReceive(up.Take(kChunk));
    device.Receive(down.Take(kChunk), now);

    TimeNs next = now + kMs;
    if (up.bytes.empty() && down.bytes.empty() && device.Output().empty() &&
        gateway.Output().empty()) {
      const TimeNs wake =
          std::min({device.NextWakeup(), gateway.NextWakeup(), server.NextWakeup()});
      if (wake == kNever) return false;
      next = std::max(next, wake);
    }
    now = next;
    if (device.NextWakeup() <= now) device.OnTimer(now);
    if (gateway.NextWakeup() <= now) {
      gateway.OnTimer(now);
      if (gateway.state() == LinkState::kFailed) {
        ++gateway_restarts;
        gateway.Start(now, ++gateway_nonce_);
      }
    }
    if (server.NextWakeup() <= now) {
      server.OnTimer(now);
      DrainServer();
    }
    FeedGateway();
    return true;
  }

  void GatewayReceive(const Bytes& bytes) {
    std::span<const std::byte> rest(bytes);
    while (!rest.empty()) {
      const FrameDecoder::Step got = gateway.Receive(rest);
      rest = rest.subspan(got.consumed);
      if (!got.delivered) continue;
      // The server decodes in place: the payload is aligned already, and copying it to aligned
      // storage keeps the test independent of that.
      const std::span<std::byte> frame =
          std::as_writable_bytes(std::span(inbox_)).first(got.frame.size());
      std::copy(got.frame.begin(), got.frame.end(), frame.begin());
      server.OnFrame(kWorker, frame, now);
      DrainServer();
    }
    FeedGateway();
  }

  void DrainServer() {
    protocol::OutgoingFrame out;
    while (server.PollFrame(out)) {
      if (out.to == kWorker) to_device_.emplace_back(out.bytes.begin(), out.bytes.end());
    }
  }

  void FeedGateway() {
    while (gateway.CanSend() && !to_device_.empty()) {
      EXPECT_TRUE(gateway.Send(to_device_.front(), now).ok());
      to_device_.pop_front();
    }
  }

  std::vector<std::uint64_t> inbox_;
  std::deque<Bytes> to_device_;
  std::uint32_t gateway_nonce_ = 200;
};

// The run completed, with the models of the directly connected run, bit for bit: the line
// changed when frames arrived, never what they carried.
void ExpectTheDirectRunsModels(const SerialRun& run) {
  EXPECT_EQ(run.server.round(), kRounds);
  EXPECT_EQ(run.server.counters().rounds_completed, kRounds);
  EXPECT_TRUE(run.server.status().ok());
  EXPECT_EQ(run.worker.phase(), protocol::WorkerPhase::kFinished);
  const Models& direct = DirectRunModels();
  EXPECT_EQ(std::vector<float>(run.server.model().begin(), run.server.model().end()),
            direct.server);
  EXPECT_EQ(std::vector<float>(run.worker.model().begin(), run.worker.model().end()),
            direct.worker);
  // And it trained: the model moved most of the way to the optimum (the single target).
  EXPECT_LT(harness::Distance(run.server.model(), Target()),
            0.25f * harness::Distance(InitialModel(), Target()));
}

TEST(SessionLinkRunTest, AWorkerOverASerialLineTrainsAsOneConnectedDirectly) {
  SerialRun run;
  run.Start();
  ASSERT_TRUE(run.RunToEnd(60 * kSecond));
  ExpectTheDirectRunsModels(run);
  // Every frame the worker sent crossed the line, and every one the server sent it arrived.
  const SessionLinkCounters& counters = run.device.counters();
  EXPECT_EQ(counters.frames_sent, run.worker.counters().frames_sent);
  EXPECT_EQ(counters.frames_received, run.worker.counters().frames_received);
  EXPECT_EQ(counters.frames_received, run.server.counters().frames_sent);
  EXPECT_EQ(run.worker.counters().updates_sent, kRounds);
  EXPECT_EQ(counters.frames_too_large + counters.frames_misrouted, 0u);
  EXPECT_EQ(counters.link_restarts + counters.peer_restarts, 0u);
  EXPECT_EQ(run.device.link().counters().retransmissions, 0u);
  EXPECT_EQ(run.gateway.counters().retransmissions, 0u);
  EXPECT_EQ(run.server.counters().rejoins, 0u);
}

TEST(SessionLinkRunTest, LostCorruptedAndRepeatedBytesOnlyCostRetransmissions) {
  // Three faults per thousand bytes each way: a broadcast of ~400 bytes gets through one time in
  // three, so the links may need many attempts (and must not give up).
  SerialRun run({.retransmit_ns = kLineOptions.retransmit_ns, .max_attempts = 100});
  for (Channel* channel : {&run.up, &run.down}) {
    channel->loss = 0.001;
    channel->corruption = 0.001;
    channel->duplication = 0.001;
  }
  run.Start();
  ASSERT_TRUE(run.RunToEnd(120 * kSecond));
  ExpectTheDirectRunsModels(run);
  // The faults were there, in both directions, and the links dealt with them.
  EXPECT_GT(run.device.link().counters().retransmissions, 0u);
  EXPECT_GT(run.gateway.counters().retransmissions, 0u);
  EXPECT_GT(run.device.link().decoder_counters().rejected(), 0u);
  EXPECT_GT(run.gateway.decoder_counters().rejected(), 0u);
  EXPECT_EQ(run.device.counters().link_restarts, 0u);
}

TEST(SessionLinkRunTest, ARestartedGatewayMakesTheWorkerJoinAgain) {
  SerialRun run;
  run.Start();
  ASSERT_TRUE(run.RunUntil([&] { return run.server.round() >= 8; }, 60 * kSecond));
  ASSERT_FALSE(run.server.Finished());
  const std::uint64_t joins = run.worker.counters().joins_sent;
  run.RestartGateway();
  ASSERT_TRUE(run.RunToEnd(120 * kSecond));
  EXPECT_EQ(run.device.counters().peer_restarts, 1u);
  EXPECT_EQ(run.device.counters().link_restarts, 0u);
  // The worker's Join after the restart reached the server, which took it back.
  EXPECT_EQ(run.worker.counters().resyncs, 1u);
  EXPECT_GT(run.worker.counters().joins_sent, joins);
  EXPECT_EQ(run.server.counters().rejoins, 1u);
  EXPECT_EQ(run.server.counters().workers_lost, 1u);
  ExpectTheDirectRunsModels(run);
}

TEST(SessionLinkRunTest, ACutLineFailsTheLinkWhichStartsAgainAndTheRunCompletes) {
  SerialRun run;
  run.Start();
  ASSERT_TRUE(run.RunUntil([&] { return run.server.round() >= 6; }, 60 * kSecond));
  run.up.cut = true;
  run.down.cut = true;
  // Longer than max_attempts x retransmit_ns (400 ms) after the device's next heartbeat.
  ASSERT_TRUE(run.RunFor(1 * kSecond));
  EXPECT_GE(run.device.counters().link_restarts, 1u);
  EXPECT_NE(run.device.link().state(), LinkState::kReady);
  EXPECT_GE(run.gateway_restarts, 1u);
  const std::uint32_t round = run.server.round();
  run.up.cut = false;
  run.down.cut = false;
  ASSERT_TRUE(run.RunToEnd(120 * kSecond));
  EXPECT_LT(round, kRounds);  // the cut fell inside the run
  EXPECT_GE(run.worker.counters().resyncs, 1u);
  EXPECT_GE(run.server.counters().rejoins, 1u);
  ExpectTheDirectRunsModels(run);
}

}  // namespace
}  // namespace edgesgd::serial
