// The driver's run of its session and its clocks: starting and running, the session's timer,
// the deadlines of connections and dials, draining when the run is over, and stopping.
#include <algorithm>
#include <csignal>

#include "edgesgd/platform/log.h"
#include "session_driver_impl.h"

namespace edgesgd::tcp {

void SessionDriver::Impl::Start(protocol::Session& session, DoneCallback on_done) {
  session_ = &session;
  on_done_ = std::move(on_done);
  if (options_.handle_signals) {
    asio::error_code ignored;
    signals_.emplace(io_);
    signals_->add(SIGINT, ignored);
    signals_->add(SIGTERM, ignored);
    ++pending_;
    signals_->async_wait([this](const asio::error_code& error, int signal_number) {
      if (!error && !stopped_) {
        Log(LogLevel::kInfo, "%s: signal %d: shutting down", options_.log_name, signal_number);
        Stop(DriverStop::kSignal);
      }
      OperationDone();
    });
  }
  if (acceptor_.is_open()) Accept();
  last_dial_up_ = Now();
  for (Dial& dial : dials_) {
    dial.channel->Connect(dial.endpoint);
  }
  if (!dials_.empty()) ArmDeadline(DeadlineAfter(last_dial_up_, options_.give_up_ns));
  in_session_ = true;
  session.Start(Now());
  in_session_ = false;
  AfterSessionCall();
  Settle();
}

DriverStop SessionDriver::Impl::Run(protocol::Session& session) {
  bool done = false;
  DriverStop result = DriverStop::kStopped;
  Start(session, [this, &done, &result](DriverStop stop) {
    result = stop;
    done = true;
    io_.stop();  // a caller's loop may carry other work
  });
  // run(), not a run_one() loop: Asio recycles handler memory per run() call, so steady state
  // stays free of allocations.
  if (io_.stopped()) io_.restart();
  while (!done) {
    io_.run();
    if (!done) io_.restart();  // stopped from outside: the driver's work is still queued
  }
  return result;
}

void SessionDriver::Impl::Settle() {
  if (in_session_) return;
  if (draining_) lost_.clear();
  while (!lost_.empty() && !stopped_) {
    const PeerId peer = lost_.back();
    lost_.pop_back();
    in_session_ = true;
    session_->OnPeerLost(peer, Now());
    in_session_ = false;
    AfterSessionCall();
  }
  if (finishing_ && !stopped_ && QueuesEmpty()) Drain();
}

void SessionDriver::Impl::Drain() {
  if (!draining_) {
    // Everything is written; half-close so each peer reads its last frames and then the end of
    // the stream (a full close with unread input would reset the connection instead).
    draining_ = true;
    for (const std::unique_ptr<FrameChannel>& channel : channels_) {
      if (channel->connected() && channel->bound) {
        channel->ShutdownSend();
      } else {
        channel->Close(CloseReason::kShutdown, /*silent=*/true);
      }
    }
  }
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (channel->connected()) return;  // the linger deadline ends the wait
  }
  Stop(DriverStop::kFinished);
}

void SessionDriver::Impl::ArmSessionTimer() {
  const TimeNs wakeup = session_->NextWakeup();
  if (wakeup == armed_wakeup_ || stopped_) return;
  armed_wakeup_ = wakeup;
  if (wakeup == kNever) {
    session_timer_.cancel();
    return;
  }
  session_timer_.expires_at(TimePoint(wakeup));
  ++pending_;
  session_timer_.async_wait([this](const asio::error_code& error) {
    if (!error && !stopped_) {  // else re-armed or cancelled
      armed_wakeup_ = kNever;
      const TimeNs now = Now();
      if (now >= session_->NextWakeup()) {
        in_session_ = true;
        session_->OnTimer(now);
        in_session_ = false;
        AfterSessionCall();
      } else {
        ArmSessionTimer();
      }
      Settle();
    }
    OperationDone();
  });
}

void SessionDriver::Impl::ArmDeadline(TimeNs deadline) {
  if (deadline >= armed_deadline_ || stopped_ || session_ == nullptr) return;
  armed_deadline_ = deadline;
  deadline_timer_.expires_at(TimePoint(deadline));  // a pending wait ends as operation_aborted
  ++pending_;
  deadline_timer_.async_wait([this](const asio::error_code& error) {
    if (!error && !stopped_) {  // else moved earlier or cancelled
      armed_deadline_ = kNever;
      OnDeadline();
    }
    OperationDone();
  });
}

void SessionDriver::Impl::OnDeadline() {
  const TimeNs now = Now();
  for (const std::unique_ptr<FrameChannel>& channel : channels_) channel->CheckDeadlines(now);
  if (now >= accept_retry_at_ && !stopped_) {
    accept_retry_at_ = kNever;
    Accept();
  }
  for (Dial& dial : dials_) {
    if (!finishing_ && dial.channel->reusable() && now >= dial.next_attempt) {
      dial.channel->Connect(dial.endpoint);
    }
  }
  if (DialUp()) last_dial_up_ = now;
  Settle();
  if (stopped_) return;
  if (finishing_ && now >= finish_deadline_) {
    Stop(DriverStop::kFinished);
  } else if (options_.give_up_ns != kNever && now - last_dial_up_ > options_.give_up_ns) {
    Log(LogLevel::kError, "%s: no connection for %.1f s: giving up", options_.log_name,
        static_cast<double>(options_.give_up_ns) * 1e-9);
    Stop(DriverStop::kGaveUp);
  } else {
    ArmDeadline(NextDeadline());
  }
}

TimeNs SessionDriver::Impl::NextDeadline() const {
  TimeNs next = std::min(finishing_ ? finish_deadline_ : kNever, accept_retry_at_);
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    next = std::min(next, channel->NextDeadline());
  }
  for (const Dial& dial : dials_) {
    // A channel with operations still pending is offered again by OnChannelHandled.
    if (!finishing_ && dial.channel->reusable()) next = std::min(next, dial.next_attempt);
  }
  if (!DialUp()) next = std::min(next, DeadlineAfter(last_dial_up_, options_.give_up_ns));
  return next;
}

bool SessionDriver::Impl::DialUp() const {
  if (dials_.empty()) return true;  // nothing to give up on
  for (const Dial& dial : dials_) {
    // Connections the other end refuses (a TLS or authentication mismatch) do not count.
    if (dial.channel->connected() && dial.channel->established()) return true;
  }
  return false;
}

bool SessionDriver::Impl::QueuesEmpty() const {
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (channel->connected() && channel->queued_frames() > 0) return false;
  }
  return true;
}

void SessionDriver::Impl::Stop(DriverStop reason) {
  if (stopped_) return;
  stopped_ = true;
  stop_reason_ = reason;
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    channel->Close(CloseReason::kShutdown, /*silent=*/true);
  }
  asio::error_code ignored;
  acceptor_.close(ignored);
  session_timer_.cancel();
  deadline_timer_.cancel();
  if (signals_) {
    signals_->clear(ignored);  // the process's default handling is back
    signals_->cancel(ignored);
  }
  Complete();
}

void SessionDriver::Impl::Complete() {
  if (!stopped_ || completed_ || pending_ != 0) return;
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (channel->pending_operations() != 0) return;  // its last handler calls back
  }
  completed_ = true;
  asio::post(io_, [this] {
    // Moved out first: the callback may destroy the driver.
    const DoneCallback done = std::move(on_done_);
    if (done) done(stop_reason_);
  });
}

}  // namespace edgesgd::tcp
