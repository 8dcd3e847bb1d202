#pragma once

// SimNetwork: a deterministic in-process network that drives any protocol::Session in virtual
// time. It owns the clock, the links and the faults; the driver owns the sessions and reads
// their state between events (through the observer or Step/RunUntil).
//
// Timing model of a frame emitted by session A for session B at virtual time t:
//   1. compute: A's CPU is a FIFO. The frame is ready at
//        ready = max(t, cpu_free(A)) + ComputeNs(work_samples, ns_per_sample, speed(A)),
//      and A's CPU is busy until then (later frames of A, control frames included, queue
//      behind it).
//   2. uplink: tx_start = max(ready, uplink_free(A)), tx_end = tx_start + TransmitNs(size, up(A)).
//   3. propagation: the frame reaches B's access link at tx_end + latency(A) + latency(B).
//   4. downlink: B's downlink serialises frames in order of arrival (store-and-forward):
//        delivered = max(arrival, downlink_free(B)) + TransmitNs(size, down(B)).
//   size = frame bytes + SimConfig::frame_overhead_bytes; a 0 bandwidth is infinite.
// So with an infinite downlink, delivery = latency + size*8/uplink (+ queueing behind earlier
// frames of A). Faults: a lost frame still occupies A's uplink; a duplicated frame crosses B's
// downlink twice; a frame is dropped if A is offline at tx_start or B is offline when it reaches
// B's link or is delivered.
//
// Events (deliveries, wake-ups, starts, crashes) are processed in (time, sequence number) order,
// where sequence numbers are assigned when events are scheduled: one total order, independent of
// addresses and containers, so identical inputs give identical runs byte for byte.
//
// Sessions: each is started at its DeviceProfile::start_ns (in peer order at equal times) and
// woken at max(NextWakeup(), now) — re-read after every call, so a changed wake-up replaces the
// pending one. A session that asks again for a time already served is woken again (moving the
// deadline is the session's job; SimConfig::max_events bounds one that never does). Sessions
// that report Finished() keep receiving frames and wake-ups until the network stops (a finished
// server may still have to answer stragglers). Frames arrive at 8-byte aligned addresses
// (FlatBuffers verifies alignment relative to the buffer start, so decoders need it on ARM).
//
// A typical driver: AddSession for the server and every device, SetObserver to drain the
// server's round events (and evaluate the model) after each event, then Run(); or
// `while (!server.Finished() && network.Step()) {}` to stop as soon as the server is done, or
// RunUntil(t) for fixed-interval evaluation.
//
// Memory: frame bytes are copied into pooled buffers that are reused; after warm-up (once the
// pool and the event heap have reached the peak number of frames in flight) processing events
// allocates nothing. Not thread-safe: one thread drives a network (and, with
// SimConfig::device_threads, lends sessions to helper threads of its own while it waits).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "edgesgd/protocol/session.h"
#include "edgesgd/sim/device_counters.h"
#include "edgesgd/sim/device_profile.h"
#include "edgesgd/sim/fault_model.h"
#include "edgesgd/sim/sim_config.h"
#include "edgesgd/sim/trace_hash.h"

namespace edgesgd::sim {

// Largest peer id a network accepts (StreamId keeps 24 bits of device id).
inline constexpr protocol::PeerId kMaxPeerId = 0x00FFFFFFu;

// Why a run stopped. kRunning: it has not (RunUntil returned because it reached its time).
enum class StopReason : std::uint8_t {
  kRunning,
  kAllFinished,  // every session that has not crashed reports Finished()
  kTimeLimit,    // the next event is later than SimConfig::time_limit_ns
  kEventLimit,   // SimConfig::max_events events were processed
  kIdle,         // nothing is scheduled any more and some session has not finished
};

// Stable lower-case name of `reason` ("all_finished", "time_limit", ...), for logs and reports.
const char* StopReasonName(StopReason reason);

// What the observer is told after each event that called into a session.
enum class SimEventKind : std::uint8_t {
  kStart,           // peer's Session::Start ran
  kFrameDelivered,  // peer's OnFrame ran with a frame from `from`
  kTimer,           // peer's OnTimer ran
  kCrash,           // peer crashed; every other running session got OnPeerLost(peer)
};

struct SimEvent {
  protocol::TimeNs time = 0;
  SimEventKind kind = SimEventKind::kTimer;
  protocol::PeerId peer = 0;
  protocol::PeerId from = 0;  // sender, for kFrameDelivered
  std::size_t bytes = 0;      // frame size, for kFrameDelivered
};

// Called after every SimEvent, with the network's clock at the event's time. It may read the
// network and the sessions; it must not call into the sessions or into Step/RunUntil/Run.
using SimObserver = std::function<void(const SimEvent&)>;

class SimNetwork {
 public:
  // Checks `config` (CHECK: fault probabilities in [0, 1], see FaultConfig). Does not start
  // anything: add sessions, then Step/RunUntil/Run.
  explicit SimNetwork(const SimConfig& config);

  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  // Registers `session` as peer `id` with the link and compute `profile`. The session is not
  // owned and must outlive the network. Must be called before the first Step/RunUntil/Run;
  // CHECKs: id <= kMaxPeerId and not yet used, compute_speed > 0 and finite, bandwidths <=
  // kMaxBitsPerSecond. Allocates (node table).
  void AddSession(protocol::PeerId id, protocol::Session& session, const DeviceProfile& profile);

  // Makes peer `id` crash at virtual time `at`: from then on its session is never called again,
  // frames it has not started transmitting and frames addressed to it are dropped (counted as
  // frames_dropped_offline on it), and every other started, non-crashed session gets
  // OnPeerLost(id, at) in ascending peer order (sessions ignore peers they do not know). A
  // crashed session no longer has to finish for kAllFinished. Must be called before the run
  // starts (CHECK), for a registered peer (CHECK).
  void ScheduleCrash(protocol::PeerId id, protocol::TimeNs at);

  // Installs the observer (replacing any previous one; an empty function removes it).
  void SetObserver(SimObserver observer);

  // Processes the next event (the first call also schedules every session's Start). Returns
  // false, without doing anything, once the run has stopped; stop_reason() then says why.
  bool Step();

  // Processes every event at or before virtual time `time`. Returns kRunning if the run can
  // continue (now() is then `time`, or later if it already was), otherwise the reason it stopped
  // (now() is then the time of the last event, or time_limit_ns for kTimeLimit).
  StopReason RunUntil(protocol::TimeNs time);

  // Runs until the network stops; returns stop_reason(). Always terminates (time and event
  // limits).
  StopReason Run();

  // Current virtual time.
  protocol::TimeNs now() const { return now_; }
  StopReason stop_reason() const { return stop_reason_; }
  bool stopped() const { return stop_reason_ != StopReason::kRunning; }

  // Counters of peer `id` (CHECK: registered).
  const DeviceCounters& counters(protocol::PeerId id) const;
  // Sum of every peer's counters.
  DeviceCounters TotalCounters() const;

  // FNV-1a over every call into a session, in order: (kind, time, peer) and, for deliveries,
  // (from, size, TraceHash::ContentDigest of the bytes). Equal hashes mean equal runs as the
  // sessions saw them (OnPeerLost calls follow from the crash events they are part of).
  std::uint64_t trace_hash() const { return trace_.value(); }

  // Events processed so far (deliveries, wake-ups, starts, crashes and frames reaching a
  // downlink; superseded wake-ups are not counted).
  std::uint64_t events_processed() const { return events_processed_; }
  // Calls into sessions so far (Start, OnFrame, OnTimer, OnPeerLost).
  std::uint64_t session_calls() const { return session_calls_; }
  // Frames scheduled and not yet delivered or dropped.
  std::size_t frames_in_flight() const { return frames_in_flight_; }

  // Whether peer `id` is offline at `time` because of a drop-out epoch (not a crash).
  bool IsDroppedOut(protocol::PeerId id, protocol::TimeNs time) const {
    return faults_.IsOffline(id, time);
  }

  const SimConfig& config() const { return config_; }

 private:
  enum class EventKind : std::uint8_t { kStart, kTimer, kReachDownlink, kDeliver, kCrash };

  struct Event {
    protocol::TimeNs time;
    std::uint64_t sequence;  // scheduling order; breaks ties between equal times
    std::uint64_t aux;       // frame slot (frames) or wake-up generation (timers)
    protocol::PeerId peer;   // the peer whose session the event concerns
    EventKind kind;
  };

  // Heap order: the earliest (time, sequence) on top.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };

  struct FrameSlot {
    // 64-bit words so the frame starts 8-byte aligned, as the FlatBuffers verifier requires on
    // strict-alignment targets; only grows, so reuse never allocates once it is large enough.
    std::vector<std::uint64_t> words;
    std::size_t size = 0;
    protocol::PeerId from = 0;
    std::uint32_t pending = 0;  // deliveries still scheduled (2 for a duplicated frame)
    bool duplicated = false;

    std::span<std::byte> bytes() { return {reinterpret_cast<std::byte*>(words.data()), size}; }
    std::span<const std::byte> bytes() const {
      return {reinterpret_cast<const std::byte*>(words.data()), size};
    }
  };

  struct Node {
    protocol::Session* session = nullptr;
    DeviceProfile profile;
    DeviceCounters counters;
    protocol::TimeNs cpu_free = 0;
    protocol::TimeNs uplink_free = 0;
    protocol::TimeNs downlink_free = 0;
    protocol::TimeNs wake = protocol::kNever;  // wake-up currently scheduled
    std::uint64_t wake_generation = 0;         // bumps when `wake` changes; stales old events
    protocol::TimeNs crash_at = protocol::kNever;
    std::uint64_t frames_emitted = 0;  // the sender's frame number for fault draws
    bool present = false;
    bool started = false;
    bool crashed = false;
    bool finished = false;
  };

  void EnsureStarted();
  // Drops superseded wake-ups from the top of the heap, then decides whether the run must stop
  // before the next event. Returns true if an event may be processed.
  bool PrepareNext();
  void Process(const Event& event);
  void Push(protocol::TimeNs time, EventKind kind, protocol::PeerId peer, std::uint64_t aux);
  bool IsStale(const Event& event) const;
  // Whether `id` cannot receive or send at `time` (not started, crashed or dropped out).
  bool IsUnreachable(const Node& node, protocol::PeerId id, protocol::TimeNs time) const;

  // After any call into node `id`'s session: schedules its frames, its wake-up and notes
  // whether it finished.
  void AfterSessionCall(protocol::PeerId id);
  // Starts the session of `id` (kStart) or calls its timer (kTimer), traced and notified.
  void CallSession(SimEventKind kind, protocol::PeerId id);
  void ScheduleFrame(protocol::PeerId from, const protocol::OutgoingFrame& frame);
  void Deliver(const Event& event);
  // The counters and trace of delivering slot `slot_index` to `peer` (reachable).
  void NoteDelivery(protocol::PeerId peer, std::uint32_t slot_index);
  // With device threads: takes the deliveries of the top instant to distinct devices off the
  // heap and runs them (DeliverBatch). False, having taken nothing, when there are fewer than two.
  bool StepDeliveries();
  void DeliverBatch();
  void ReachDownlink(const Event& event);
  void Notify(SimEventKind kind, protocol::PeerId peer, protocol::PeerId from, std::size_t bytes);

  std::uint32_t AcquireSlot();
  void ReleaseSlot(std::uint32_t slot);

  SimConfig config_;
  FaultModel faults_;
  std::vector<Node> nodes_;  // indexed by peer id
  std::vector<Event> heap_;
  std::vector<FrameSlot> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<Event> batch_;           // StepDeliveries' events, in event order
  std::vector<std::uint8_t> reached_;  // per batch event: the receiver was reachable
  std::vector<std::uint64_t> batch_mark_;  // per peer: the batch that holds a delivery to it
  std::uint64_t batch_number_ = 0;
  std::vector<std::thread> helpers_;  // DeliverBatch's, joined before it returns
  SimObserver observer_;
  TraceHash trace_;
  protocol::TimeNs now_ = 0;
  std::uint64_t next_sequence_ = 0;
  std::uint64_t events_processed_ = 0;
  std::uint64_t session_calls_ = 0;
  std::size_t frames_in_flight_ = 0;
  std::size_t live_unfinished_ = 0;  // registered, not crashed, not Finished()
  bool started_ = false;
  StopReason stop_reason_ = StopReason::kRunning;
};

}  // namespace edgesgd::sim
