// Fuzz target: a ServerSession fed a script of events (fuzz_scripts.h, "Server session
// script"): raw frames from any peer, valid Joins, Updates, Heartbeats and Leaves built from the
// script's operands, clock advances with timer expiries, and lost links. Invariants, after every
// event:
//   - every frame the server hands out decodes through the wire decoder, is 8-byte aligned and
//     goes to a worker peer (1..workers);
//   - the timer makes progress: after OnTimer(now), NextWakeup() > now (a driver calling it
//     again at once would spin otherwise);
//   - the round never exceeds the run's rounds, and while the run's status is ok its model is
//     finite (a non-finite model must end the run with kDataLoss).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/protocol/server_session.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/session_frames.h"

namespace edgesgd::fuzz {
namespace {

using protocol::ServerSession;

class ServerHarness {
 public:
  ServerHarness(const protocol::RunConfig& config, const protocol::ServerOptions& options)
      : config_(config), storage_(ServerSession::ArenaBytes(config, options)), maker_() {
    const Status init =
        server_.Init(storage_.arena, AllCodecs(), config, options, InitialModel(config));
    EDGESGD_FUZZ_CHECK(init.ok(), "the harness's server initializes");
    server_.Start(now_);
    Check();
  }

  void Event(FuzzInput& in) {
    const auto op = static_cast<ServerOp>(in.U8() % kServerOpCount);
    switch (op) {
      case ServerOp::kFrame: {
        const PeerId from = ScriptPeer(in.U8());
        const std::uint16_t length = in.U16();
        Deliver(from, incoming_.Load(in.Bytes(length)));
        break;
      }
      case ServerOp::kJoin: {
        const PeerId from = ScriptPeer(in.U8());
        const std::uint8_t flags = in.U8();
        wire::JoinInfo join;
        join.architecture = wire::HostArchitecture();
        join.codecs = (flags & 2) != 0 ? 0u : AllCodecs().Mask();
        join.memory_bytes = (flags & 4) != 0 ? 1024u : 0u;
        join.max_frame_bytes = (flags & 8) != 0 ? 64u : 0u;
        const std::uint32_t sender = (flags & 1) != 0 ? wire::kUnassignedDevice : from;
        Deliver(from, maker_.Join({sender, 0, sequence_++}, join));
        break;
      }
      case ServerOp::kUpdate:
        Update(in);
        break;
      case ServerOp::kHeartbeat: {
        const PeerId from = ScriptPeer(in.U8());
        Deliver(from, maker_.Heartbeat({from, server_.round(), sequence_++}, {now_ / 1000, 0}));
        break;
      }
      case ServerOp::kLeave: {
        const PeerId from = ScriptPeer(in.U8());
        const auto reason = static_cast<wire::LeaveReason>(in.U8() % 8);
        const std::span<const std::byte> frame = maker_.Leave({from, 0, sequence_++}, reason);
        if (!frame.empty()) Deliver(from, frame);  // empty: a reason outside the schema
        break;
      }
      case ServerOp::kAdvance:
        now_ += kTick * in.U16();
        Timer();
        break;
      case ServerOp::kWakeup:
        if (server_.NextWakeup() != protocol::kNever && server_.NextWakeup() > now_) {
          now_ = server_.NextWakeup();
        }
        Timer();
        break;
      case ServerOp::kPeerLost:
        server_.OnPeerLost(ScriptPeer(in.U8()), now_);
        Check();
        break;
    }
  }

 private:
  void Update(FuzzInput& in) {
    const PeerId from = ScriptPeer(in.U8());
    const std::uint8_t round_choice = in.U8();
    const std::uint8_t seed = in.U8();
    const std::uint8_t scale = in.U8();
    const std::uint8_t flags = in.U8();
    std::uint32_t round = server_.round() + round_choice % 3;
    round = round == 0 ? 0 : round - 1;
    const std::uint32_t sender = (flags & 1) != 0 ? from % kWorkers + 1 : from;
    // A worker's update: its gradient at the server's model, through the run's codec (its
    // round's parameters, for a quantization schedule).
    const std::vector<float> gradient = PatternValues(config_.layout.dimension(), seed, scale);
    CodecParams params = config_.codec;
    if ((flags & 2) != 0) {
      params = IdentityParams{};
    } else {
      const Result<CodecParams> round_params =
          AllCodecs().RoundParams(config_.codec, round, config_.rounds, gradient);
      if (round_params.ok()) params = round_params.value();
    }
    const std::span<const std::byte> frame = maker_.Payload(
        {sender, round, sequence_++}, wire::PayloadMessage::Update({from, config_.batch}), params,
        config_.layout, {config_.seed, round, from}, gradient);
    if (!frame.empty()) Deliver(from, frame);
  }

  void Deliver(PeerId from, std::span<const std::byte> frame) {
    server_.OnFrame(from, frame, now_);
    Check();
  }

  void Timer() {
    if (server_.NextWakeup() > now_) return;
    server_.OnTimer(now_);
    EDGESGD_FUZZ_CHECK(server_.NextWakeup() > now_,
                       "after OnTimer(now) the server's next wakeup is later than now");
    Check();
  }

  void Check() {
    DrainAndCheck(server_, 1, kWorkers);
    protocol::RejectEvent reject;
    while (server_.PollRejectEvent(reject)) {
    }
    protocol::RoundEvent round;
    while (server_.PollRoundEvent(round)) {
      EDGESGD_FUZZ_CHECK(round.reported <= round.selected, "a round's reporters were selected");
    }
    EDGESGD_FUZZ_CHECK(server_.round() <= config_.rounds, "the round never exceeds the run's");
    if (server_.status().ok()) {
      for (const float value : server_.model()) {
        EDGESGD_FUZZ_CHECK(std::isfinite(value), "a running server's model is finite");
      }
    }
  }

  protocol::RunConfig config_;
  ArenaStorage storage_;
  ServerSession server_;
  FrameMaker maker_;
  AlignedBytes incoming_;
  TimeNs now_ = 0;
  std::uint64_t sequence_ = 0;
};

void Run(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const NamedRunConfig& run = RunConfigAt(in.U8());
  const protocol::ServerOptions options = ServerOptionsFor(in.U8());
  ServerHarness harness(run.config, options);
  RunScript(in, harness);
}

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::Run(data, size);
  return 0;
}
