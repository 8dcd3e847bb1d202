// Fuzz target: a WorkerSession fed a script of events (fuzz_scripts.h, "Worker session
// script"): raw frames from the server or strangers, Welcomes built from a run configuration
// with fields overridden by the script (ids, worker and round counts, local steps, batch,
// learning rate, ...), ModelBroadcasts of models and aggregates, Leaves, Errors, clock advances
// with timer expiries and lost links. A worker that finishes is replaced by a fresh one (a few
// times), so one input can go on; a script ends after kMaxGradientCallsPerScript gradients in
// all (a budget on one input's time, not a bound on the worker). Invariants, after every event:
//   - every frame the worker hands out decodes through the wire decoder, is 8-byte aligned and
//     goes to the server;
//   - bounded work: no event makes the worker call its gradient callback more than
//     kMaxGradientCallsPerEvent times (the check traps at the first call beyond, so a Welcome
//     asking for 2^32 local steps is reported at once instead of hanging the fuzzer);
//   - the gradient callback gets a point and a gradient of the run's dimension;
//   - the timer makes progress: after OnTimer(now), NextWakeup() > now.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "edgesgd/protocol/worker_session.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/session_frames.h"

namespace edgesgd::fuzz {
namespace {

using protocol::WorkerSession;

// Most gradient evaluations one event may cause: one round's local steps, at most the bound a
// worker puts on a Welcome's local steps.
constexpr std::uint64_t kMaxGradientCallsPerEvent = protocol::kMaxLocalSteps;
// Arena beyond InitArenaBytes: room for the configurations of fuzz_scripts.h many times over;
// a Welcome of a larger model makes the worker fail with kResourceExhausted (a legal outcome).
constexpr std::size_t kWelcomeArenaBytes = std::size_t{256} << 10;

// The workers' arena storage, allocated once: a fresh megabyte-sized allocation per worker
// costs more than the worker's whole run (the arena zeroes what it hands out).
std::span<std::byte> ArenaBuffer() {
  static std::vector<std::uint64_t> words(
      (WorkerSession::InitArenaBytes() + kWelcomeArenaBytes) / 8 + kArenaAlignment / 8 + 1);
  return std::as_writable_bytes(std::span(words));
}
constexpr int kMaxWorkerRestarts = 8;
// A script stops once its events have cost this many gradients in all (each event's work is
// bounded, but hundreds of rounds of 4096 local steps would make one input take seconds).
constexpr std::uint64_t kMaxGradientCallsPerScript = std::uint64_t{1} << 18;

class WorkerHarness {
 public:
  explicit WorkerHarness(std::uint8_t flags) : flags_(flags) { Restart(); }

  std::uint64_t gradient_total() const { return gradient_total_; }

  void Event(FuzzInput& in) {
    if (worker_->Finished() && restarts_ < kMaxWorkerRestarts) Restart();
    gradient_calls_ = 0;
    const auto op = static_cast<WorkerOp>(in.U8() % kWorkerOpCount);
    switch (op) {
      case WorkerOp::kFrame: {
        const PeerId from = in.U8() % 3;
        const std::uint16_t length = in.U16();
        Deliver(from, incoming_.Load(in.Bytes(length)));
        break;
      }
      case WorkerOp::kWelcome:
        Welcome(in);
        break;
      case WorkerOp::kBroadcast:
        Broadcast(in);
        break;
      case WorkerOp::kLeave: {
        const auto reason = static_cast<wire::LeaveReason>(in.U8() % 8);
        const std::span<const std::byte> frame =
            maker_.Leave({protocol::kServerPeer, 0, sequence_++}, reason);
        if (!frame.empty()) Deliver(protocol::kServerPeer, frame);  // empty: outside the schema
        break;
      }
      case WorkerOp::kError: {
        const auto code = static_cast<StatusCode>(in.U8() % 16);
        const std::span<const std::byte> text = in.Bytes(in.U8());
        const std::string_view reason(reinterpret_cast<const char*>(text.data()), text.size());
        const std::span<const std::byte> frame =
            maker_.Error({protocol::kServerPeer, 0, sequence_++}, code, reason);
        if (!frame.empty()) Deliver(protocol::kServerPeer, frame);
        break;
      }
      case WorkerOp::kAdvance:
        now_ += kTick * in.U16();
        Timer();
        break;
      case WorkerOp::kWakeup:
        if (worker_->NextWakeup() != protocol::kNever && worker_->NextWakeup() > now_) {
          now_ = worker_->NextWakeup();
        }
        Timer();
        break;
      case WorkerOp::kPeerLost:
        worker_->OnPeerLost(in.U8() % 3, now_);
        Check();
        break;
    }
  }

 private:
  static Status Gradient(void* user, std::span<const float> point, std::uint32_t, std::uint32_t,
                         std::span<float> gradient) {
    auto* harness = static_cast<WorkerHarness*>(user);
    ++harness->gradient_calls_;
    ++harness->gradient_total_;
    EDGESGD_FUZZ_CHECK(harness->gradient_calls_ <= kMaxGradientCallsPerEvent,
                       "one event makes the worker compute a bounded number of gradients");
    EDGESGD_FUZZ_CHECK(point.size() == gradient.size() &&
                           point.size() == harness->worker_->config().layout.dimension(),
                       "the gradient callback gets vectors of the run's dimension");
    for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - Target(i);
    return Status::Ok();
  }

  void Restart() {
    ++restarts_;
    worker_.reset();
    arena_ = std::make_unique<Arena>(ArenaBuffer());
    worker_ = std::make_unique<WorkerSession>();
    protocol::WorkerOptions options;
    options.device_id = (flags_ & 1) != 0 ? wire::kUnassignedDevice : 1u;
    options.gradient = &Gradient;
    options.codecs = &AllCodecs();
    options.user = this;
    options.heartbeat_interval_ns = (flags_ & 2) != 0 ? protocol::kNever : 500 * kMs;
    options.add_noise = &AddNoiseShare;
    options.noise_key = {0x5EC2E7};
    options.secure_entropy = &ScriptEntropy;
    // A signing worker joins signed secure runs and refuses unsigned ones; the others, the
    // reverse.
    if ((flags_ & 4) != 0) options.secure_signing = ScriptSigning(1);
    const Status init = worker_->Init(*arena_, options);
    EDGESGD_FUZZ_CHECK(init.ok(), "the harness's worker initializes");
    worker_->Start(now_);
    Check();
  }

  void Welcome(FuzzInput& in) {
    const protocol::RunConfig& config = RunConfigAt(in.U8()).config;
    const std::uint8_t mask = in.U8();
    wire::WelcomeInfo welcome = protocol::ToWelcomeInfo(config, 1, kWorkers);
    if ((mask & 1) != 0) welcome.assigned_id = in.U32();
    if ((mask & 2) != 0) welcome.workers = in.U32();
    if ((mask & 4) != 0) welcome.rounds = in.U32();
    if ((mask & 8) != 0) welcome.training.local_steps = in.U32();
    if ((mask & 16) != 0) welcome.training.batch = in.U32();
    if ((mask & 32) != 0) welcome.training.learning_rate = in.F32();
    if ((mask & 64) != 0) welcome.training.momentum = in.F32();
    if ((mask & 128) != 0) {
      welcome.training.aggregate = in.U8();
      welcome.training.feedback = in.U8();
    }
    const std::span<const std::byte> frame =
        maker_.Welcome({protocol::kServerPeer, 0, sequence_++}, welcome);
    if (!frame.empty()) Deliver(protocol::kServerPeer, frame);
  }

  void Broadcast(FuzzInput& in) {
    const std::uint32_t round = in.U8();
    const std::uint8_t flags = in.U8();
    const std::uint32_t participants = in.U8();
    const std::uint8_t seed = in.U8();
    const std::uint8_t scale = in.U8();
    // The run the worker was told, or (before a Welcome) the first configuration.
    const protocol::RunConfig& config =
        worker_->configured() ? worker_->config() : RunConfigAt(0).config;
    const auto content =
        (flags & 1) != 0 ? wire::BroadcastContent::kAggregate : wire::BroadcastContent::kModel;
    const CodecParams params = (flags & 2) != 0 ? config.codec : protocol::ModelCodec();
    const std::vector<float> values = PatternValues(config.layout.dimension(), seed, scale);
    const std::span<const std::byte> frame =
        maker_.Payload({protocol::kServerPeer, round, sequence_++},
                       wire::PayloadMessage::ModelBroadcast({content, participants}), params,
                       config.layout, {config.seed, round == 0 ? 0 : round - 1, 0}, values);
    if (!frame.empty()) Deliver(protocol::kServerPeer, frame);
  }

  void Deliver(PeerId from, std::span<const std::byte> frame) {
    worker_->OnFrame(from, frame, now_);
    Check();
  }

  void Timer() {
    if (worker_->NextWakeup() > now_) return;
    worker_->OnTimer(now_);
    EDGESGD_FUZZ_CHECK(worker_->NextWakeup() > now_,
                       "after OnTimer(now) the worker's next wakeup is later than now");
    Check();
  }

  void Check() { DrainAndCheck(*worker_, protocol::kServerPeer, protocol::kServerPeer); }

  std::uint8_t flags_;
  int restarts_ = 0;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<WorkerSession> worker_;
  FrameMaker maker_;
  AlignedBytes incoming_;
  TimeNs now_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint64_t gradient_calls_ = 0;  // in the current event
  std::uint64_t gradient_total_ = 0;  // in the whole script
};

void Run(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  WorkerHarness harness(in.U8());
  RunScript(in, harness,
            [&harness] { return harness.gradient_total() < kMaxGradientCallsPerScript; });
}

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::Run(data, size);
  return 0;
}
