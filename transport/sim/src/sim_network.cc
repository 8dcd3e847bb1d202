#include "edgesgd/sim/sim_network.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "edgesgd/core/check.h"
#include "edgesgd/sim/link_timing.h"

namespace edgesgd::sim {

using protocol::kNever;
using protocol::OutgoingFrame;
using protocol::PeerId;
using protocol::TimeNs;

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kRunning:
      return "running";
    case StopReason::kAllFinished:
      return "all_finished";
    case StopReason::kTimeLimit:
      return "time_limit";
    case StopReason::kEventLimit:
      return "event_limit";
    case StopReason::kIdle:
      return "idle";
  }
  return "unknown";
}

namespace {
thread_local std::uint32_t device_thread_index = 0;
}  // namespace

std::uint32_t DeviceThreadIndex() { return device_thread_index; }

SimNetwork::SimNetwork(const SimConfig& config)
    : config_(config), faults_(config.seed, config.faults) {
  EDGESGD_CHECK(config.device_threads >= 1 && config.device_threads <= kMaxDeviceThreads);
}

void SimNetwork::AddSession(PeerId id, protocol::Session& session, const DeviceProfile& profile) {
  EDGESGD_CHECK(!started_);
  EDGESGD_CHECK(id <= kMaxPeerId);
  EDGESGD_CHECK(profile.compute_speed > 0.0 && std::isfinite(profile.compute_speed));
  EDGESGD_CHECK(profile.uplink_bps <= kMaxBitsPerSecond);
  EDGESGD_CHECK(profile.downlink_bps <= kMaxBitsPerSecond);
  const std::size_t index = id;
  if (index >= nodes_.size()) nodes_.resize(index + 1);
  Node& node = nodes_[index];
  EDGESGD_CHECK(!node.present);
  node.present = true;
  node.session = &session;
  node.profile = profile;
  ++live_unfinished_;
}

void SimNetwork::ScheduleCrash(PeerId id, TimeNs at) {
  EDGESGD_CHECK(!started_);
  EDGESGD_CHECK(id < nodes_.size() && nodes_[id].present);
  nodes_[id].crash_at = at;
}

void SimNetwork::SetObserver(SimObserver observer) { observer_ = std::move(observer); }

const DeviceCounters& SimNetwork::counters(PeerId id) const {
  EDGESGD_CHECK(id < nodes_.size() && nodes_[id].present);
  return nodes_[id].counters;
}

DeviceCounters SimNetwork::TotalCounters() const {
  DeviceCounters total;
  for (const Node& node : nodes_) total += node.counters;
  return total;
}

void SimNetwork::EnsureStarted() {
  if (started_) return;
  started_ = true;
  // Room for a few events per device up front; the heap grows (amortised) to the peak number
  // of frames in flight during warm-up and stays there.
  heap_.reserve(nodes_.size() * 4 + 64);
  if (config_.device_threads > 1) {
    batch_.reserve(nodes_.size());
    reached_.reserve(nodes_.size());
    batch_mark_.assign(nodes_.size(), 0);
    helpers_.reserve(config_.device_threads - 1);
  }
  // Starts first, then crashes, each in peer order: at equal times a start runs before a crash
  // and both before any frame, whatever order the driver registered things in.
  for (std::size_t id = 0; id < nodes_.size(); ++id) {
    if (nodes_[id].present) {
      Push(nodes_[id].profile.start_ns, EventKind::kStart, static_cast<PeerId>(id), 0);
    }
  }
  for (std::size_t id = 0; id < nodes_.size(); ++id) {
    if (nodes_[id].present && nodes_[id].crash_at != kNever) {
      Push(nodes_[id].crash_at, EventKind::kCrash, static_cast<PeerId>(id), 0);
    }
  }
}

void SimNetwork::Push(TimeNs time, EventKind kind, PeerId peer, std::uint64_t aux) {
  heap_.push_back(Event{time, next_sequence_++, aux, peer, kind});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

bool SimNetwork::IsStale(const Event& event) const {
  const Node& node = nodes_[event.peer];
  switch (event.kind) {
    case EventKind::kStart:
      return event.time >= node.crash_at;
    case EventKind::kTimer:
      return node.crashed || event.aux != node.wake_generation || event.time >= node.crash_at;
    default:
      return false;
  }
}

bool SimNetwork::IsUnreachable(const Node& node, PeerId id, TimeNs time) const {
  return !node.started || node.crashed || time >= node.crash_at || faults_.IsOffline(id, time);
}

bool SimNetwork::PrepareNext() {
  if (stopped()) return false;
  if (live_unfinished_ == 0) {
    stop_reason_ = StopReason::kAllFinished;
    return false;
  }
  while (!heap_.empty() && IsStale(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    heap_.pop_back();
  }
  if (heap_.empty()) {
    stop_reason_ = StopReason::kIdle;
    return false;
  }
  if (heap_.front().time > config_.time_limit_ns) {
    now_ = std::max(now_, config_.time_limit_ns);
    stop_reason_ = StopReason::kTimeLimit;
    return false;
  }
  if (events_processed_ >= config_.max_events) {
    stop_reason_ = StopReason::kEventLimit;
    return false;
  }
  return true;
}

bool SimNetwork::Step() {
  EnsureStarted();
  if (!PrepareNext()) return false;
  if (config_.device_threads > 1 && StepDeliveries()) return true;
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Event event = heap_.back();
  heap_.pop_back();
  now_ = event.time;
  ++events_processed_;
  Process(event);
  return true;
}

StopReason SimNetwork::RunUntil(TimeNs time) {
  EnsureStarted();
  while (PrepareNext()) {
    if (heap_.front().time > time) {
      now_ = std::max(now_, time);
      return StopReason::kRunning;
    }
    Step();
  }
  return stop_reason_;
}

StopReason SimNetwork::Run() {
  while (Step()) {
  }
  return stop_reason_;
}

void SimNetwork::Process(const Event& event) {
  Node& node = nodes_[event.peer];
  switch (event.kind) {
    case EventKind::kStart:
      node.started = true;
      CallSession(SimEventKind::kStart, event.peer);
      break;
    case EventKind::kTimer:
      node.wake = kNever;  // consumed: asking for the same time again schedules a new wake-up
      ++node.counters.timer_calls;
      CallSession(SimEventKind::kTimer, event.peer);
      break;
    case EventKind::kReachDownlink:
      ReachDownlink(event);
      break;
    case EventKind::kDeliver:
      Deliver(event);
      break;
    case EventKind::kCrash: {
      node.crashed = true;
      if (!node.finished) --live_unfinished_;
      node.wake = kNever;
      ++node.wake_generation;
      trace_.AddU64(static_cast<std::uint64_t>(SimEventKind::kCrash));
      trace_.AddU64(now_);
      trace_.AddU64(event.peer);
      for (std::size_t id = 0; id < nodes_.size(); ++id) {
        Node& other = nodes_[id];
        if (!other.present || !other.started || other.crashed || id == event.peer) continue;
        ++session_calls_;
        other.session->OnPeerLost(event.peer, now_);
        AfterSessionCall(static_cast<PeerId>(id));
      }
      Notify(SimEventKind::kCrash, event.peer, 0, 0);
      break;
    }
  }
}

void SimNetwork::CallSession(SimEventKind kind, PeerId id) {
  ++session_calls_;
  trace_.AddU64(static_cast<std::uint64_t>(kind));
  trace_.AddU64(now_);
  trace_.AddU64(id);
  if (kind == SimEventKind::kStart) {
    nodes_[id].session->Start(now_);
  } else {
    nodes_[id].session->OnTimer(now_);
  }
  AfterSessionCall(id);
  Notify(kind, id, 0, 0);
}

void SimNetwork::AfterSessionCall(PeerId id) {
  Node& node = nodes_[id];
  OutgoingFrame frame;
  while (node.session->PollFrame(frame)) ScheduleFrame(id, frame);
  const TimeNs wake = node.session->NextWakeup();
  if (wake != node.wake) {
    node.wake = wake;
    ++node.wake_generation;  // any wake-up already queued for this node is now stale
    if (wake != kNever) Push(std::max(wake, now_), EventKind::kTimer, id, node.wake_generation);
  }
  const bool finished = node.session->Finished();
  if (finished != node.finished) {
    node.finished = finished;
    if (finished) {
      --live_unfinished_;
    } else {
      ++live_unfinished_;
    }
  }
}

void SimNetwork::ScheduleFrame(PeerId from, const OutgoingFrame& frame) {
  Node& src = nodes_[from];
  const std::uint64_t size = frame.bytes.size();
  ++src.counters.frames_sent;
  src.counters.bytes_sent += size;
  const std::uint64_t sequence = src.frames_emitted++;
  const std::uint64_t link_bytes = size + config_.frame_overhead_bytes;

  // The CPU and the uplink are FIFOs: each frame waits for the previous one of this device.
  const TimeNs ready = SaturatingAdd(
      std::max(now_, src.cpu_free),
      ComputeNs(frame.work_samples, config_.ns_per_sample, src.profile.compute_speed));
  src.cpu_free = ready;
  const TimeNs tx_start = std::max(ready, src.uplink_free);
  const TimeNs tx_end = SaturatingAdd(tx_start, TransmitNs(link_bytes, src.profile.uplink_bps));
  src.uplink_free = tx_end;

  if (frame.to >= nodes_.size() || !nodes_[frame.to].present) {
    ++src.counters.frames_unroutable;
    return;
  }
  if (tx_start >= src.crash_at || faults_.IsOffline(from, tx_start)) {
    ++src.counters.frames_dropped_offline;
    return;
  }
  const FrameFate fate = faults_.DrawFate(from, sequence);
  if (fate.lost) {
    ++src.counters.frames_lost;
    return;
  }

  const std::uint32_t slot_index = AcquireSlot();
  FrameSlot& slot = slots_[slot_index];
  const std::size_t words = (frame.bytes.size() + 7) / 8;
  if (slot.words.size() < words) slot.words.resize(words);
  slot.size = frame.bytes.size();
  if (!frame.bytes.empty()) std::memcpy(slot.words.data(), frame.bytes.data(), slot.size);
  slot.from = from;
  slot.duplicated = fate.duplicated;
  if (fate.corrupted && faults_.Corrupt(from, sequence, slot.bytes()) > 0) {
    ++src.counters.frames_corrupted;
  }
  if (fate.duplicated) ++src.counters.frames_duplicated;

  const Node& dst = nodes_[frame.to];
  const TimeNs arrival =
      SaturatingAdd(tx_end, SaturatingAdd(src.profile.latency_ns, dst.profile.latency_ns));
  if (dst.profile.downlink_bps == 0) {
    // Nothing to serialise at the receiver: schedule the delivery (and its copy) directly,
    // saving one event per frame.
    slot.pending = fate.duplicated ? 2 : 1;
    Push(arrival, EventKind::kDeliver, frame.to, slot_index);
    if (fate.duplicated) Push(arrival, EventKind::kDeliver, frame.to, slot_index);
  } else {
    slot.pending = 1;
    Push(arrival, EventKind::kReachDownlink, frame.to, slot_index);
  }
}

void SimNetwork::ReachDownlink(const Event& event) {
  Node& dst = nodes_[event.peer];
  const auto slot_index = static_cast<std::uint32_t>(event.aux);
  FrameSlot& slot = slots_[slot_index];
  if (IsUnreachable(dst, event.peer, now_)) {
    ++dst.counters.frames_dropped_offline;
    ReleaseSlot(slot_index);
    return;
  }
  // Reserved in order of arrival at the receiver (this event), not of sending.
  const TimeNs transmit =
      TransmitNs(slot.size + std::uint64_t{config_.frame_overhead_bytes}, dst.profile.downlink_bps);
  TimeNs done = SaturatingAdd(std::max(now_, dst.downlink_free), transmit);
  Push(done, EventKind::kDeliver, event.peer, slot_index);
  if (slot.duplicated) {
    slot.pending = 2;
    done = SaturatingAdd(done, transmit);
    Push(done, EventKind::kDeliver, event.peer, slot_index);
  }
  dst.downlink_free = done;
}

void SimNetwork::Deliver(const Event& event) {
  Node& dst = nodes_[event.peer];
  const auto slot_index = static_cast<std::uint32_t>(event.aux);
  if (IsUnreachable(dst, event.peer, now_)) {
    ++dst.counters.frames_dropped_offline;
    ReleaseSlot(slot_index);
    return;
  }
  const FrameSlot& slot = slots_[slot_index];
  const PeerId from = slot.from;
  const std::size_t size = slot.size;
  NoteDelivery(event.peer, slot_index);
  dst.session->OnFrame(from, slot.bytes(), now_);
  // The slot is released only after the session's reply frames are copied: a session may
  // legitimately hand back a span into the frame it was given (a relay), and the copy must not
  // alias the buffer it is written to.
  AfterSessionCall(event.peer);
  ReleaseSlot(slot_index);
  Notify(SimEventKind::kFrameDelivered, event.peer, from, size);
}

void SimNetwork::NoteDelivery(PeerId peer, std::uint32_t slot_index) {
  const FrameSlot& slot = slots_[slot_index];
  Node& dst = nodes_[peer];
  ++dst.counters.frames_received;
  dst.counters.bytes_received += slot.size;
  ++session_calls_;
  trace_.AddU64(static_cast<std::uint64_t>(SimEventKind::kFrameDelivered));
  trace_.AddU64(now_);
  trace_.AddU64(peer);
  trace_.AddU64(slot.from);
  trace_.AddBytes(slot.bytes());
}

bool SimNetwork::StepDeliveries() {
  // Only deliveries at one instant to distinct devices: whatever those sessions send is
  // scheduled later than all of them, so running them together changes no event's order.
  const Event& first = heap_.front();
  if (first.kind != EventKind::kDeliver || first.peer == protocol::kServerPeer) return false;
  // A finished server is answering the last frames; the run may stop between two of them.
  if (nodes_.size() > protocol::kServerPeer && nodes_[protocol::kServerPeer].finished) return false;
  const TimeNs instant = first.time;
  ++batch_number_;
  batch_.clear();
  const auto taken = [&] { return static_cast<std::uint64_t>(batch_.size()); };
  while (!heap_.empty() && events_processed_ + taken() < config_.max_events) {
    const Event& top = heap_.front();
    if (top.kind != EventKind::kDeliver || top.time != instant ||
        top.peer == protocol::kServerPeer || batch_mark_[top.peer] == batch_number_) {
      break;
    }
    batch_mark_[top.peer] = batch_number_;
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    batch_.push_back(heap_.back());
    heap_.pop_back();
  }
  now_ = instant;
  if (batch_.size() == 1) {
    ++events_processed_;
    Process(batch_.front());
    return true;
  }
  DeliverBatch();
  return true;
}

void SimNetwork::DeliverBatch() {
  const std::size_t count = batch_.size();
  reached_.assign(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    reached_[i] = IsUnreachable(nodes_[batch_[i].peer], batch_[i].peer, now_) ? 0 : 1;
  }
  // The sessions' calls, spread over the threads in contiguous shares.
  const std::size_t threads = std::min<std::size_t>(config_.device_threads, count);
  const auto run_share = [this, count, threads](std::size_t share) {
    device_thread_index = static_cast<std::uint32_t>(share);
    for (std::size_t i = count * share / threads; i < count * (share + 1) / threads; ++i) {
      if (reached_[i] == 0) continue;
      const Event& event = batch_[i];
      const FrameSlot& slot = slots_[static_cast<std::uint32_t>(event.aux)];
      nodes_[event.peer].session->OnFrame(slot.from, slot.bytes(), now_);
    }
    device_thread_index = 0;
  };
  helpers_.clear();
  for (std::size_t share = 1; share < threads; ++share) helpers_.emplace_back(run_share, share);
  run_share(0);
  for (std::thread& helper : helpers_) helper.join();
  // What Deliver does around the call, event by event, in event order.
  for (std::size_t i = 0; i < count; ++i) {
    const Event& event = batch_[i];
    const auto slot_index = static_cast<std::uint32_t>(event.aux);
    Node& dst = nodes_[event.peer];
    ++events_processed_;
    if (reached_[i] == 0) {
      ++dst.counters.frames_dropped_offline;
      ReleaseSlot(slot_index);
      continue;
    }
    const PeerId from = slots_[slot_index].from;
    const std::size_t size = slots_[slot_index].size;
    NoteDelivery(event.peer, slot_index);
    AfterSessionCall(event.peer);
    ReleaseSlot(slot_index);
    Notify(SimEventKind::kFrameDelivered, event.peer, from, size);
  }
}

void SimNetwork::Notify(SimEventKind kind, PeerId peer, PeerId from, std::size_t bytes) {
  if (observer_) observer_(SimEvent{now_, kind, peer, from, bytes});
}

std::uint32_t SimNetwork::AcquireSlot() {
  ++frames_in_flight_;
  if (!free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  EDGESGD_CHECK(slots_.size() < 0xFFFFFFFFu);
  slots_.emplace_back();
  // Keeps ReleaseSlot's push_back from allocating: every slot fits in the free list.
  free_slots_.reserve(slots_.size());
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

void SimNetwork::ReleaseSlot(std::uint32_t slot) {
  if (--slots_[slot].pending != 0) return;
  free_slots_.push_back(slot);
  --frames_in_flight_;
}

}  // namespace edgesgd::sim
