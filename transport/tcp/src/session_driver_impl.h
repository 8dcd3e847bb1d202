#pragma once

// The TCP session driver's inside, shared by its two source files: session_driver.cc (listening,
// dialling, connections, and routing the session's frames) and session_driver_loop.cc (running
// the session, timers, draining and stopping).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "edgesgd/platform/log.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/session_driver.h"
#include "frame_channel.h"

namespace edgesgd::tcp {

using internal::ChannelEvents;
using internal::CloseReason;
using internal::DeadlineAfter;
using internal::FrameChannel;
using internal::SharedFrame;
using internal::SharedFramePool;
using internal::TlsContext;
using platform::Log;
using platform::LogLevel;

class SessionDriver::Impl final : public ChannelEvents {
 public:
  // On `external` (the caller's loop), or on a loop of its own when null.
  explicit Impl(asio::io_context* external)
      : owned_io_(external == nullptr ? std::make_unique<asio::io_context>(1) : nullptr),
        io_(external == nullptr ? *owned_io_ : *external),
        acceptor_(io_),
        session_timer_(io_),
        deadline_timer_(io_) {}

  HostResult<> Open(const DriverOptions& options);
  void Start(protocol::Session& session, DoneCallback on_done);
  DriverStop Run(protocol::Session& session);
  void RequestStop() {
    if (session_ != nullptr) Stop(DriverStop::kStopped);
  }
  asio::io_context& io() { return io_; }
  void SessionChanged() {
    if (session_ == nullptr || stopped_ || draining_ || in_session_) return;
    AfterSessionCall();
    Settle();
  }
  TimeNs Now() const {
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    // +1: a session may treat time 0 as "never happened".
    return static_cast<TimeNs>(
               std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) +
           1;
  }

  // ---- ChannelEvents ----
  void OnChannelFrame(FrameChannel& channel, std::span<const std::byte> frame) override;
  void OnChannelClosed(FrameChannel& channel, CloseReason reason) override;
  void OnChannelConnected(FrameChannel& channel) override;
  void OnChannelDeadline(TimeNs deadline) override { ArmDeadline(deadline); }
  void OnChannelHandled(FrameChannel& channel) override;
  TimeNs ChannelNow() const override { return Now(); }

  DriverOptions options_;
  DriverCounters counters_;
  std::function<void()> after_call_;
  std::uint16_t listen_port_ = 0;

 private:
  struct Dial {
    asio::ip::tcp::endpoint endpoint;
    FrameChannel* channel = nullptr;
    TimeNs next_attempt = 0;
    std::uint32_t failures = 0;
  };

  // Loads DriverOptions::tls into the context every channel shares. Errors as Open's.
  HostResult<> OpenTls(const TlsFiles& files);
  FrameChannel& NewChannel();
  void Accept();
  std::size_t CountUnidentified() const;
  // Closes the accepted connection that has waited longest for its first frame, if any.
  void EvictOldestUnidentified();
  void ScheduleReconnect(Dial& dial);
  // Identifies an accepted connection by its first frame. False if it was closed instead.
  bool Bind(FrameChannel& channel, std::span<const std::byte> frame);
  FrameChannel* SendChannel(PeerId peer);
  // Sends `frame` to `to`: the session's bytes (written at once, or copied), or a shared frame.
  template <typename Frame>
  void Route(protocol::PeerId to, Frame& frame);
  // One peer's share of a frame for several: written at once from the session's bytes when its
  // channel can, else queued as `shared`, the copy made for the first channel that queues it.
  void RouteShared(protocol::PeerId to, std::span<const std::byte> bytes, SharedFrame*& shared);

  // After any call into the session: the hook, then the session's frames, then its timer.
  void AfterSessionCall();
  // Delivers lost links noticed while the session could not be called, then checks whether the
  // run is over. Called at the end of every handler (the driver's and, through
  // OnChannelHandled, the channels').
  void Settle();
  void ArmSessionTimer();
  std::chrono::steady_clock::time_point TimePoint(TimeNs time) const {
    return start_ + std::chrono::nanoseconds(time - 1);
  }
  // The deadline timer serves every deadline that is not the session's: connections' hello,
  // idle, write and connect deadlines, reconnects, the linger and give-up times. ArmDeadline
  // moves it earlier when `deadline` comes before the armed one; when it fires, OnDeadline acts
  // on what is due and re-arms it for the next deadline there is (none: it stays idle).
  void ArmDeadline(TimeNs deadline);
  void OnDeadline();
  TimeNs NextDeadline() const;
  bool DialUp() const;
  bool QueuesEmpty() const;
  // Finished and flushed: half-close every link, stop once all peers closed theirs.
  void Drain();
  // Closes every connection and timer; Complete follows once their handlers ran.
  void Stop(DriverStop reason);
  // One of the driver's own pending operations (accept, timer or signal wait) finished.
  void OperationDone() {
    --pending_;
    if (stopped_) Complete();
  }
  // Once stopped with nothing pending: posts the DoneCallback (posted, so that it may destroy
  // the driver: no handler of the driver runs after it).
  void Complete();

  // Declared first, destroyed last: handlers still queued in an owned loop are destroyed with it.
  std::unique_ptr<asio::io_context> owned_io_;
  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer session_timer_;
  asio::steady_timer deadline_timer_;
  std::optional<asio::signal_set> signals_;  // only with DriverOptions::handle_signals
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::optional<TlsContext> tls_context_;

  protocol::Session* session_ = nullptr;
  DoneCallback on_done_;
  bool in_session_ = false;
  SharedFramePool frames_;  // declared before the channels that hold its frames
  std::deque<std::unique_ptr<FrameChannel>> channels_;
  std::vector<Dial> dials_;
  std::vector<PeerId> lost_;  // peers whose link dropped, for Settle
  TimeNs armed_wakeup_ = kNever;
  TimeNs armed_deadline_ = kNever;
  TimeNs last_dial_up_ = 0;  // last time a dialled connection was up (or Start)
  // Accepting paused until then, after the process ran out of descriptors (kNever: not paused).
  TimeNs accept_retry_at_ = kNever;
  static constexpr TimeNs kAcceptBackoffNs = 100 * kNsPerMs;
  bool finishing_ = false;
  bool draining_ = false;  // finished and flushed: waiting for peers to close their ends
  TimeNs finish_deadline_ = kNever;
  bool stopped_ = false;
  bool completed_ = false;
  std::uint32_t pending_ = 0;  // the driver's own operations whose handler has not run yet
  DriverStop stop_reason_ = DriverStop::kFinished;
  std::uint64_t jitter_state_ = 0;
};

}  // namespace edgesgd::tcp
