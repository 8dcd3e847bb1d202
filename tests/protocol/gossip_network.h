#pragma once

// The in-test gossip driver shared by the GossipPeerSession tests: n sessions, a fake clock, a
// fixed or random latency per frame, optional drop / mutation hooks.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"

namespace edgesgd::protocol::gossip_test {

constexpr TimeNs kMs = 1'000'000;
constexpr TimeNs kDeadline = 50 * kMs;
constexpr TimeNs kLatency = 1 * kMs;

inline TensorLayout TestLayout() {
  constexpr std::uint64_t kSizes[] = {6, 4};
  return TensorLayout::FromSizes(kSizes).value();
}

// f_i(x) = 0.5 ||x - target_i||^2, so the gradient is x - target_i and the network optimum is
// the mean target. `user` points at the peer's target.
inline Status QuadraticGradient(void* user, std::span<const float> point, std::uint32_t /*round*/,
                         std::uint32_t /*local_step*/, std::span<float> gradient) {
  const auto& target = *static_cast<const std::vector<float>*>(user);
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - target[i];
  return Status::Ok();
}

inline Status FailingGradient(void*, std::span<const float>, std::uint32_t, std::uint32_t, std::span<float>) {
  return Status::Unavailable();
}

// A received or built frame in 8-byte aligned storage.
struct FrameBytes {
  std::vector<std::uint64_t> words;
  std::size_t size = 0;

  FrameBytes() = default;
  explicit FrameBytes(std::span<const std::byte> bytes)
      : words((bytes.size() + 7) / 8), size(bytes.size()) {
    if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  }
  std::span<std::byte> mutable_bytes() {
    return std::span<std::byte>(reinterpret_cast<std::byte*>(words.data()), size);
  }
  std::span<const std::byte> bytes() const {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(words.data()), size);
  }
  void Resize(std::size_t new_size) {
    words.resize((new_size + 7) / 8 + 1);
    size = new_size;
  }
};

inline double ConsensusDistance(const std::vector<std::vector<float>>& models) {
  const std::size_t d = models.front().size();
  std::vector<double> mean(d, 0.0);
  for (const auto& x : models) {
    for (std::size_t i = 0; i < d; ++i) mean[i] += static_cast<double>(x[i]);
  }
  for (double& m : mean) m /= static_cast<double>(models.size());
  double total = 0.0;
  for (const auto& x : models) {
    for (std::size_t i = 0; i < d; ++i) {
      const double diff = static_cast<double>(x[i]) - mean[i];
      total += diff * diff;
    }
  }
  return total / static_cast<double>(models.size());
}

// A GossipExchange carrying `values` as `sender`'s vector of `round` (dense identity payload
// unless `codec` says otherwise).
inline FrameBytes GossipFrame(PeerId sender, std::uint32_t round, std::span<const float> values,
                              wire::GossipInfo info = {0, 0, wire::GossipVector::kModel},
                              CodecParams codec = CodecParams{}) {
  const Result<TensorLayout> layout = TensorLayout::Single(values.size());
  std::vector<std::uint64_t> buffer(wire::FrameBuilderBytes(codec, layout.value()) / 8 + 1);
  wire::FrameBuilder builder(
      std::span<std::byte>(reinterpret_cast<std::byte*>(buffer.data()), buffer.size() * 8));
  const PayloadSpans spans =
      builder
          .BeginPayloadFrame({sender, round, 7}, wire::PayloadMessage::GossipExchange(info),
                             codec, layout.value())
          .value();
  std::copy(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(spans.values.size()),
            spans.values.begin());
  return FrameBytes(builder.FinishPayloadFrame().value());
}

// A hostile network for GossipNetwork::mutate: returns how many copies of `frame` to send after
// maybe losing, duplicating, bit-flipping, truncating, replaying (from `history`, which it
// extends) or replacing it with garbage.
inline int FuzzFrame(std::vector<FrameBytes>& history, FrameBytes& frame, std::mt19937& rng) {
  history.push_back(frame);
  const std::uint32_t dice = std::uniform_int_distribution<std::uint32_t>(0, 99)(rng);
  if (dice < 10) return 0;  // lost
  if (dice < 20) return 2;  // duplicated
  if (dice < 30) {          // a bit flipped anywhere
    const std::size_t bit =
        std::uniform_int_distribution<std::size_t>(0, frame.size * 8 - 1)(rng);
    frame.mutable_bytes()[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
    return 1;
  }
  if (dice < 35) {  // truncated
    frame.size = std::uniform_int_distribution<std::size_t>(0, frame.size - 1)(rng);
    return 1;
  }
  if (dice < 40) {  // replaced by an old frame (a replay)
    frame = history[std::uniform_int_distribution<std::size_t>(0, history.size() - 1)(rng)];
    return 1;
  }
  if (dice < 43) {  // random garbage with a plausible prefix
    const std::size_t size = std::uniform_int_distribution<std::size_t>(4, 300)(rng);
    frame.Resize(size);
    for (std::byte& b : frame.mutable_bytes()) {
      b = static_cast<std::byte>(std::uniform_int_distribution<int>(0, 255)(rng));
    }
    const auto length = static_cast<std::uint32_t>(size - 4);
    std::memcpy(frame.mutable_bytes().data(), &length, 4);
    return 1;
  }
  return 1;
}

struct PeerBox {
  std::vector<std::byte> storage;
  std::unique_ptr<Arena> arena;
  GossipPeerSession session;
  std::vector<float> target;
  std::vector<float> initial;
  void* user = nullptr;  // the gradient's user pointer (nullptr: &target)
  bool silent = false;   // everything it sends is dropped
  bool crashed = false;  // no calls into it, nothing to or from it
};

struct InFlight {
  PeerId from = 0;
  PeerId to = 0;
  TimeNs deliver_at = 0;
  std::uint64_t sequence = 0;
  FrameBytes frame;
};

class GossipNetwork {
 public:
  // Peers 1..n of `topology` with MH weights, quadratic targets in [-1, 1] and initial models
  // in [-spread, spread] (both from `seed`).
  GossipNetwork(Topology topology, std::uint32_t rounds, float lr, float spread = 5.0f,
                std::uint32_t seed = 1)
      : topology_(topology), rng_(seed) {
    std::uniform_real_distribution<float> target_dist(-1.0f, 1.0f);
    std::uniform_real_distribution<float> init_dist(-spread, spread);
    const std::size_t d = TestLayout().dimension();
    peers_.resize(topology.peers + 1);
    for (PeerId id = 1; id <= topology.peers; ++id) {
      auto box = std::make_unique<PeerBox>();
      box->target.resize(d);
      box->initial.resize(d);
      for (float& t : box->target) t = target_dist(rng_);
      for (float& x : box->initial) x = init_dist(rng_);
      peers_[id] = std::move(box);
    }
    config_.layout = TestLayout();
    config_.rounds = rounds;
    config_.learning_rate = lr;
    config_.neighbour_deadline_ns = kDeadline;
  }

  GossipConfig ConfigFor(PeerId id) const {
    GossipConfig config = config_;
    config.mixing = MakeMixingRow(topology_, MixingRule::kMetropolisHastings, id).value();
    return config;
  }

  // The configuration every peer shares (algorithm, R, eta_g, B, ...): change it before InitAll.
  GossipConfig& base_config() { return config_; }

  void InitAll() {
    for (PeerId id = 1; id <= topology_.peers; ++id) {
      PeerBox& box = *peers_[id];
      const GossipConfig config = ConfigFor(id);
      box.storage.resize(GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
      box.arena = std::make_unique<Arena>(box.storage);
      GossipOptions options;
      options.gradient = gradient;
      options.user = box.user != nullptr ? box.user : &box.target;
      options.samples_per_step = 8;
      options.initial_model = box.initial;
      options.codecs = &AllCodecs();
      const Status check = box.session.Init(*box.arena, config, options);
      ASSERT_TRUE(check.ok()) << check.reason();
      box.arena->Seal();
    }
  }

  // Runs until every live peer finished and nothing is in flight (true), or until the time limit
  // or an idle network (false: a stall).
  bool Run(TimeNs time_limit) {
    if (!started_) {
      started_ = true;
      for (PeerId id = 1; id <= topology_.peers; ++id) {
        if (peers_[id]->crashed) continue;
        peers_[id]->session.Start(now_);
        Drain(id);
      }
    }
    while (true) {
      if (AllFinished() && in_flight_.empty()) return true;
      // The earliest delivery (ties by send order) or wake-up (ties by peer id).
      std::size_t best_frame = in_flight_.size();
      for (std::size_t i = 0; i < in_flight_.size(); ++i) {
        if (best_frame == in_flight_.size() ||
            in_flight_[i].deliver_at < in_flight_[best_frame].deliver_at ||
            (in_flight_[i].deliver_at == in_flight_[best_frame].deliver_at &&
             in_flight_[i].sequence < in_flight_[best_frame].sequence)) {
          best_frame = i;
        }
      }
      PeerId best_timer = 0;
      TimeNs timer_at = kNever;
      for (PeerId id = 1; id <= topology_.peers; ++id) {
        if (peers_[id]->crashed) continue;
        const TimeNs wake = peers_[id]->session.NextWakeup();
        if (wake < timer_at) {
          timer_at = wake;
          best_timer = id;
        }
      }
      const TimeNs frame_at =
          best_frame < in_flight_.size() ? in_flight_[best_frame].deliver_at : kNever;
      const TimeNs next = std::min(frame_at, timer_at);
      if (next == kNever) return false;
      if (next > time_limit) return false;
      now_ = std::max(now_, next);
      if (frame_at <= timer_at) {
        InFlight item = std::move(in_flight_[best_frame]);
        in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(best_frame));
        PeerBox& box = *peers_[item.to];
        if (box.crashed) continue;
        box.session.OnFrame(item.from, item.frame.bytes(), now_);
        ++delivered_;
        Drain(item.to);
      } else {
        peers_[best_timer]->session.OnTimer(now_);
        Drain(best_timer);
      }
      if (on_event) on_event(*this);
    }
  }

  // Crashes `victim` as soon as peer 1 reaches `round` (through on_event); true once it did.
  const bool& CrashWhenPeerOneReaches(std::uint32_t round, PeerId victim) {
    crash_done_ = false;
    on_event = [this, round, victim](GossipNetwork& net) {
      if (!crash_done_ && net.session(1).round() == round) {
        crash_done_ = true;
        net.Crash(victim);
      }
    };
    return crash_done_;
  }

  // Crashes `id` now: its frames stop, and its neighbours are told the link is gone.
  void Crash(PeerId id) {
    peers_[id]->crashed = true;
    for (PeerId other = 1; other <= topology_.peers; ++other) {
      if (other == id || peers_[other]->crashed) continue;
      peers_[other]->session.OnPeerLost(id, now_);
      Drain(other);
    }
  }

  std::vector<std::vector<float>> Models(bool include_crashed = false) const {
    std::vector<std::vector<float>> models;
    for (PeerId id = 1; id <= topology_.peers; ++id) {
      if (peers_[id]->crashed && !include_crashed) continue;
      const std::span<const float> x = peers_[id]->session.model();
      models.emplace_back(x.begin(), x.end());
    }
    return models;
  }

  std::vector<float> MeanTarget() const {
    std::vector<float> mean(TestLayout().dimension(), 0.0f);
    for (PeerId id = 1; id <= topology_.peers; ++id) {
      for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += peers_[id]->target[i];
    }
    for (float& m : mean) m /= static_cast<float>(topology_.peers);
    return mean;
  }

  PeerBox& peer(PeerId id) { return *peers_[id]; }
  GossipPeerSession& session(PeerId id) { return peers_[id]->session; }
  TimeNs now() const { return now_; }
  std::uint64_t delivered() const { return delivered_; }

  // Optional hooks. `mutate` sees every frame about to be put in flight and returns how many
  // copies to send (0 drops it); it may change the bytes. `jitter` adds [0, jitter) ns of latency
  // per frame, drawn from the network's generator (frames then overtake each other).
  std::function<int(PeerId from, PeerId to, FrameBytes& frame, std::mt19937& rng)> mutate;
  std::function<void(GossipNetwork&)> on_event;
  GradientFunction gradient = &QuadraticGradient;  // every peer's; set before InitAll
  TimeNs jitter = 0;
  std::vector<std::uint64_t> work_samples_seen;

 private:
  bool AllFinished() const {
    for (PeerId id = 1; id <= topology_.peers; ++id) {
      if (!peers_[id]->crashed && !peers_[id]->session.Finished()) return false;
    }
    return true;
  }

  void Drain(PeerId id) {
    PeerBox& box = *peers_[id];
    OutgoingFrame out;
    while (box.session.PollFrame(out)) {
      work_samples_seen.push_back(out.work_samples);
      if (box.silent || box.crashed) continue;
      FrameBytes frame(out.bytes);
      int copies = 1;
      if (mutate) copies = mutate(id, out.to, frame, rng_);
      for (int c = 0; c < copies; ++c) {
        TimeNs delay = kLatency;
        if (jitter > 0) delay += std::uniform_int_distribution<TimeNs>(0, jitter - 1)(rng_);
        in_flight_.push_back(InFlight{id, out.to, now_ + delay, sequence_++, frame});
      }
    }
  }

  Topology topology_;
  GossipConfig config_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<PeerBox>> peers_;
  std::vector<InFlight> in_flight_;
  TimeNs now_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint64_t delivered_ = 0;
  bool started_ = false;
  bool crash_done_ = false;
};

// Runs `network` (initialised, `peers` peers) with 3 ms of jitter and every frame through
// FuzzFrame, within `budget`: every peer must finish all `rounds` rounds healthy with a finite
// model, and the hostile frames must have been rejected somewhere.
inline void ExpectFinishesUnderFuzzing(GossipNetwork& network, PeerId peers,
                                       std::uint32_t rounds, TimeNs budget) {
  network.jitter = 3 * kMs;
  std::vector<FrameBytes> history;
  network.mutate = [&history](PeerId, PeerId, FrameBytes& frame, std::mt19937& rng) {
    return FuzzFrame(history, frame, rng);
  };
  ASSERT_TRUE(network.Run(budget));
  std::uint64_t rejected = 0;
  for (PeerId id = 1; id <= peers; ++id) {
    const GossipPeerSession& session = network.session(id);
    EXPECT_TRUE(session.Finished());
    EXPECT_EQ(session.round(), rounds);
    EXPECT_TRUE(session.status().ok());
    for (const float v : session.model()) EXPECT_TRUE(std::isfinite(v));
    rejected += session.counters().total_rejected();
  }
  EXPECT_GT(rejected, 0u);
}

// The compressed algorithms (CHOCO, BEER) with `codec` and consensus step `gamma`, in the
// configuration every peer of `network` shares.
inline GossipConfig& ConfigureCompressed(GossipNetwork& network, GossipAlgorithm algorithm,
                                         const CodecParams& codec, float gamma) {
  GossipConfig& config = network.base_config();
  config.algorithm = algorithm;
  config.codec = codec;
  config.consensus_step = gamma;
  return config;
}

// The topologies a gossip run is checked on against its float64 reference recursion.
inline const Topology kReferenceTopologies[] = {Topology{TopologyKind::kRing, 5},
                                                Topology{TopologyKind::kComplete, 4},
                                                Topology{TopologyKind::kRing, 2}};

// Runs `check` on each of kReferenceTopologies, traced by its kind.
template <typename Check>
void ForEachReferenceTopology(const Check& check) {
  for (const Topology& topology : kReferenceTopologies) {
    SCOPED_TRACE(TopologyKindName(topology.kind));
    check(topology);
  }
}

// A ring of `peers` running the compressed `algorithm` with `codec`, consensus step 0.3 and
// learning rate 0.05, initialised.
class CompressedRing : public GossipNetwork {
 public:
  CompressedRing(GossipAlgorithm algorithm, const CodecParams& codec, PeerId peers,
                 std::uint32_t rounds)
      : GossipNetwork({TopologyKind::kRing, peers}, rounds, 0.05f) {
    ConfigureCompressed(*this, algorithm, codec, 0.3f);
    InitAll();
  }
};

// The two runs on `topology` that a compressed algorithm with the identity codec and consensus
// step 1 is checked against each other with: `compressed`, of `algorithm`, and `reference`, of
// `reference_algorithm`; both initialised from the same seed (the same targets and start).
struct IdentityRuns {
  IdentityRuns(const Topology& topology, GossipAlgorithm algorithm,
               GossipAlgorithm reference_algorithm, std::uint32_t rounds, float lr)
      : compressed(topology, rounds, lr), reference(topology, rounds, lr) {
    ConfigureCompressed(compressed, algorithm, IdentityParams{}, 1.0f);
    compressed.InitAll();
    reference.base_config().algorithm = reference_algorithm;
    reference.InitAll();
  }

  GossipNetwork compressed;
  GossipNetwork reference;
};

// `session` finished its run with no frame rejected and no neighbour missed.
inline void ExpectFinishedClean(const GossipPeerSession& session) {
  EXPECT_TRUE(session.Finished());
  EXPECT_TRUE(session.status().ok()) << session.status().reason();
  EXPECT_EQ(session.counters().total_rejected(), 0u);
  EXPECT_EQ(session.counters().neighbours_missed, 0u);
}

// Every public copy `holder` keeps (its own and its neighbours', of every vector its algorithm
// copies) equals the owner's own copy bit for bit, and holds `rounds` deltas.
inline void ExpectCopiesAgree(GossipNetwork& network, PeerId holder, std::uint64_t rounds) {
  const GossipPeerSession& session = network.session(holder);
  std::vector<PeerId> owners{holder};
  for (const PeerId neighbour : session.config().mixing.neighbour_ids()) {
    owners.push_back(neighbour);
  }
  const std::size_t vectors = TracksGradients(session.config().algorithm) ? 2 : 1;
  for (std::size_t vector = 0; vector < vectors; ++vector) {
    for (const PeerId owner : owners) {
      SCOPED_TRACE(::testing::Message()
                   << "holder " << holder << ", copy of " << owner << ", vector " << vector);
      const std::span<const float> held = session.public_copy(owner, vector);
      const std::span<const float> own = network.session(owner).public_copy(owner, vector);
      ASSERT_EQ(held.size(), TestLayout().dimension());
      ASSERT_EQ(own.size(), held.size());
      EXPECT_EQ(session.public_copy_rounds(owner, vector), rounds);
      EXPECT_EQ(std::memcmp(held.data(), own.data(), held.size_bytes()), 0);
    }
  }
}

// After `rounds` rounds of a compressed algorithm on peers 1..`peers`: every peer finished clean,
// accepted `deltas_per_round` deltas a round, holds copies that agree, and its own copy of
// `vector` has moved off the zero it started from.
inline void ExpectCopiesFollowed(GossipNetwork& network, PeerId peers, std::uint64_t rounds,
                                 std::uint64_t deltas_per_round, std::size_t vector) {
  for (PeerId id = 1; id <= peers; ++id) {
    const GossipPeerSession& session = network.session(id);
    ExpectFinishedClean(session);
    EXPECT_EQ(session.counters().models_accepted, deltas_per_round * rounds);
    ExpectCopiesAgree(network, id, rounds);
    bool moved = false;
    for (const float v : session.public_copy(id, vector)) moved = moved || v != 0.0f;
    EXPECT_TRUE(moved);
  }
}

// A frame a session handed out, with a copy of its bytes (the session's stay valid only until
// its next call).
struct Sent {
  PeerId to = 0;
  std::uint64_t work_samples = 0;
  const std::byte* address = nullptr;  // where the session kept it: equal for shared bytes
  FrameBytes frame;
  wire::FrameView view() const { return wire::DecodeFrame(frame.bytes()).value(); }
};

// One GossipPeerSession fed by hand: a peer of a ring of 4 (peer 1's neighbours are 2 and 4;
// 3 is not one), targets of 1 and a start model of 3 in every coordinate, 16 samples per
// gradient call. A fixture sets config_'s algorithm (and codec) and calls InitPeer.
class SingleSessionTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kRounds = 6;
  static constexpr float kLr = 0.5f;

  void InitPeer(PeerId id) {
    config_.mixing = MakeMixingRow(ring_, MixingRule::kMetropolisHastings, id).value();
    config_.layout = TestLayout();
    config_.rounds = kRounds;
    config_.learning_rate = kLr;
    config_.neighbour_deadline_ns = kDeadline;
    target_.assign(TestLayout().dimension(), 1.0f);
    initial_.assign(TestLayout().dimension(), 3.0f);
    storage_.assign(GossipPeerSession::ArenaBytes(config_) + kArenaAlignment, std::byte{0});
    arena_ = std::make_unique<Arena>(storage_);
    options_.gradient = &QuadraticGradient;
    options_.user = &target_;
    options_.samples_per_step = 16;
    options_.codecs = &AllCodecs();
    options_.initial_model = initial_;
    const Status check = session_.Init(*arena_, config_, options_);
    ASSERT_TRUE(check.ok()) << check.reason();
  }

  // A top_k delta (k_ratio 0.3: two of the first tensor, one of the second) of `sender` for
  // `round`: `values` at the global `indices` (two in [0, 6), one in [6, 10), ascending).
  static FrameBytes TopKDelta(PeerId sender, std::uint32_t round,
                              std::array<std::uint32_t, 3> indices, std::array<float, 3> values,
                              wire::GossipVector vector = wire::GossipVector::kModelDelta) {
    const CodecParams codec = TopKParams{.k_ratio = 0.3f};
    std::vector<std::uint64_t> buffer(wire::FrameBuilderBytes(codec, TestLayout()) / 8 + 1);
    wire::FrameBuilder builder(
        std::span<std::byte>(reinterpret_cast<std::byte*>(buffer.data()), buffer.size() * 8));
    const PayloadSpans spans =
        builder
            .BeginPayloadFrame({sender, round, 3},
                               wire::PayloadMessage::GossipExchange({0, 0, vector}), codec,
                               TestLayout())
            .value();
    std::copy(indices.begin(), indices.end(), spans.indices.begin());
    std::copy(values.begin(), values.end(), spans.values.begin());
    return FrameBytes(builder.FinishPayloadFrame().value());
  }

  void Feed(PeerId from, const FrameBytes& frame, TimeNs now = 0) {
    session_.OnFrame(from, frame.bytes(), now);
  }

  std::vector<Sent> PollAll() {
    std::vector<Sent> sent;
    OutgoingFrame out;
    while (session_.PollFrame(out)) {
      sent.push_back({out.to, out.work_samples, out.bytes.data(), FrameBytes(out.bytes)});
    }
    return sent;
  }

  // Starts round 0 and drops the frames it sends.
  void StartAndDrain() {
    session_.Start(0);
    PollAll();
  }

  // A gap in `owner`'s copy: `out_of_order` deltas rejected so far, and the one frame queued is
  // the `requests_sent`th request to `owner`, in round `round`, for its copy of the vector of
  // step `step`.
  void ExpectGapRequest(PeerId owner, std::uint64_t out_of_order, std::uint64_t requests_sent,
                        std::uint32_t step, std::uint32_t round) {
    EXPECT_EQ(Rejected(GossipRejectReason::kOutOfOrder), out_of_order);
    const std::vector<Sent> requests = PollAll();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].to, owner);
    const wire::FrameView request = requests[0].view();
    EXPECT_EQ(request.message.gossip.vector, wire::GossipVector::kCopyRequest);
    EXPECT_EQ(request.message.gossip.step, step);
    EXPECT_EQ(request.header.round, round);
    EXPECT_EQ(session_.counters().copy_requests_sent, requests_sent);
  }

  // In round `round`, polls the `count` frames queued into `frames`: the first is a model copy
  // to `to`.
  void PollCopyFirst(std::uint32_t round, PeerId to, std::size_t count, std::vector<Sent>& frames) {
    ASSERT_EQ(session_.round(), round);
    frames = PollAll();
    ASSERT_EQ(frames.size(), count);
    EXPECT_EQ(frames[0].to, to);
    EXPECT_EQ(frames[0].view().message.gossip.vector, wire::GossipVector::kModelCopy);
  }

  std::uint64_t Rejected(GossipRejectReason reason) const {
    return session_.counters().rejected_for(reason);
  }

  std::vector<float> Copy(PeerId peer, std::size_t vector = 0) const {
    const std::span<const float> copy = session_.public_copy(peer, vector);
    return std::vector<float>(copy.begin(), copy.end());
  }

  Topology ring_{TopologyKind::kRing, 4};
  GossipConfig config_;
  GossipOptions options_;
  std::vector<float> target_;
  std::vector<float> initial_;
  std::vector<std::byte> storage_;
  std::unique_ptr<Arena> arena_;
  GossipPeerSession session_;
};

// A peer of the compressed algorithm kAlgorithm (CHOCO, BEER) with top_k 30% and consensus step
// kGamma, fed by hand.
template <GossipAlgorithm kAlgorithm>
class CompressedSessionTest : public SingleSessionTest {
 protected:
  static constexpr float kGamma = 0.5f;

  void SetUp() override {
    config_.algorithm = kAlgorithm;
    config_.codec = TopKParams{.k_ratio = 0.3f};
    config_.consensus_step = kGamma;
    InitPeer(1);
  }
};

}  // namespace edgesgd::protocol::gossip_test
