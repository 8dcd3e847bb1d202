#include "edgesgd/tcp/session_driver.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <deque>
#include <optional>
#include <string>

#include "edgesgd/platform/log.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/wire/frame_decoder.h"
#include "frame_channel.h"
#include "resolve.h"

namespace edgesgd::tcp {

using internal::ChannelEvents;
using internal::CloseReason;
using internal::DeadlineAfter;
using internal::FrameChannel;
using internal::Resolve;
using internal::SharedFrame;
using internal::SharedFramePool;
using internal::TlsContext;
using platform::Log;
using platform::LogLevel;

HostResult<Endpoint> ParseEndpoint(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return HostError(Status::InvalidArgument("an address is not HOST:PORT"),
                     "'" + std::string(text) + "' is not HOST:PORT");
  }
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, parse_error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parse_error != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return HostError(Status::InvalidArgument("a port is not a number in 0..65535"),
                     "'" + std::string(text) + "': the port must be a number in 0..65535");
  }
  return Endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

HostResult<std::vector<Endpoint>> ParseEndpointList(std::string_view text) {
  std::vector<Endpoint> endpoints;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    HostResult<Endpoint> endpoint = ParseEndpoint(text.substr(0, comma));
    if (!endpoint.ok()) return std::move(endpoint).error();
    endpoints.push_back(std::move(endpoint).value());
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (endpoints.empty()) return HostError(Status::InvalidArgument("an empty address list"));
  return endpoints;
}

const char* DriverStopName(DriverStop stop) {
  switch (stop) {
    case DriverStop::kFinished: return "finished";
    case DriverStop::kSignal: return "interrupted by a signal";
    case DriverStop::kGaveUp: return "no connection for the give-up time";
    case DriverStop::kStopped: return "stopped";
  }
  return "?";
}

HostResult<asio::ip::tcp::endpoint> internal::Resolve(asio::io_context& io,
                                                      const Endpoint& endpoint) {
  asio::error_code code;
  const asio::ip::address address = asio::ip::make_address(endpoint.host, code);
  if (!code) return asio::ip::tcp::endpoint(address, endpoint.port);
  asio::ip::tcp::resolver resolver(io);
  const auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), code);
  if (code || results.empty()) {
    return HostError(Status::NotFound("a host name does not resolve"),
                     "cannot resolve '" + endpoint.host + "': " + code.message());
  }
  return results.begin()->endpoint();
}

namespace {

// splitmix64: jitter needs no more.
std::uint64_t NextRandom(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

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

HostResult<> SessionDriver::Impl::Open(const DriverOptions& options) {
  options_ = options;
  options_.max_frame_bytes = std::min(options_.max_frame_bytes, wire::kMaxFrameBytes);
  options_.socket_send_buffer_bytes =
      std::min(options_.socket_send_buffer_bytes, kMaxSocketOptionBytes);
  options_.receive_low_watermark_bytes =
      std::min(options_.receive_low_watermark_bytes, kMaxSocketOptionBytes);
  jitter_state_ = options_.seed ^ 0x5DEECE66Dull;
  start_ = std::chrono::steady_clock::now();
  if (options_.tls) EDGESGD_HOST_TRY(OpenTls(*options_.tls));
  if (options_.listen) {
    HostResult<asio::ip::tcp::endpoint> endpoint = Resolve(io_, *options_.listen);
    if (!endpoint.ok()) return std::move(endpoint).error();
    asio::error_code code;
    acceptor_.open(endpoint->protocol(), code);
    if (!code) acceptor_.set_option(asio::socket_base::reuse_address(true), code);
    if (!code) acceptor_.bind(*endpoint, code);
    if (!code) acceptor_.listen(asio::socket_base::max_listen_connections, code);
    if (code) {
      return HostError(Status::Unavailable("cannot listen on the address"),
                       "cannot listen on " + options_.listen->host + ":" +
                           std::to_string(options_.listen->port) + ": " + code.message());
    }
    listen_port_ = acceptor_.local_endpoint(code).port();
  }
  for (const DialTarget& target : options_.dial) {
    HostResult<asio::ip::tcp::endpoint> endpoint = Resolve(io_, target.endpoint);
    if (!endpoint.ok()) return std::move(endpoint).error();
    Dial dial;
    dial.endpoint = *endpoint;
    FrameChannel& channel = NewChannel();
    channel.peer = target.peer;
    channel.bound = true;
    channel.dialled = true;
    channel.dial_index = dials_.size();
    dial.channel = &channel;
    dials_.push_back(dial);
  }
  lost_.reserve(64);
  return {};
}

HostResult<> SessionDriver::Impl::OpenTls(const TlsFiles& files) {
#if EDGESGD_TCP_TLS
  TlsContext& context = tls_context_.emplace(asio::ssl::context::tls);
  asio::error_code code;
  const auto failed = [&](const char* what, const std::string& file) {
    tls_context_.reset();
    return HostError(
        Status::FailedPrecondition("TLS: a certificate or key does not load"),
        std::string("TLS: cannot use the ") + what + " " + file + ": " + code.message());
  };
  // TLS 1.2 and later only.
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1,
                      code);
  if (code) return failed("options", "");
  context.use_certificate_chain_file(files.certificate, code);
  if (code) return failed("certificate", files.certificate);
  // OpenSSL checks here that the key belongs to the certificate.
  context.use_private_key_file(files.private_key, asio::ssl::context::pem, code);
  if (code) return failed("private key", files.private_key);
  context.load_verify_file(files.ca, code);
  if (code) return failed("CA certificate", files.ca);
  context.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, code);
  if (code) return failed("verify mode", "");
  return {};
#else
  (void)files;
  return HostError(
      Status::FailedPrecondition("TLS: not in this build"),
      "TLS: this edgesgd was built without it (OpenSSL was not found for this target)");
#endif
}

FrameChannel& SessionDriver::Impl::NewChannel() {
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (!channel->dialled && channel->reusable()) {
      channel->bound = false;
      channel->peer = 0;
      return *channel;
    }
  }
  channels_.push_back(std::make_unique<FrameChannel>(
      io_, *this, options_, counters_, tls_context_ ? &*tls_context_ : nullptr, frames_));
  return *channels_.back();
}

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

void SessionDriver::Impl::Accept() {
  FrameChannel& channel = NewChannel();
  ++pending_;
  acceptor_.async_accept(channel.socket(), [this, &channel](const asio::error_code& error) {
    if (stopped_) {
      asio::error_code ignored;
      channel.socket().close(ignored);  // accepted just before the stop
    } else if (error == asio::error::no_descriptors || error.value() == ENFILE ||
               error == asio::error::no_buffer_space || error == asio::error::no_memory) {
      // The connection waits in the listen queue: accepting again at once would spin. Free a
      // descriptor held by a connection that has proved nothing, and try again shortly.
      if (counters_.accept_backoffs++ % 100 == 0) {  // the first pause, then one in 100
        Log(LogLevel::kWarning, "%s: cannot accept a connection (%s): pausing %.1f s",
            options_.log_name, error.message().c_str(),
            static_cast<double>(kAcceptBackoffNs) * 1e-9);
      }
      EvictOldestUnidentified();
      accept_retry_at_ = Now() + kAcceptBackoffNs;
      ArmDeadline(accept_retry_at_);
    } else if (error != asio::error::operation_aborted) {
      if (!error) {
        ++counters_.accepted;
        channel.BeginAccepted();
        if (CountUnidentified() > options_.max_unidentified_connections) {
          EvictOldestUnidentified();
        }
      }
      // Other accept errors (ECONNABORTED) are the connection's, not the listener's.
      Accept();
    }
    OperationDone();
  });
}

std::size_t SessionDriver::Impl::CountUnidentified() const {
  std::size_t count = 0;
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (channel->unidentified()) ++count;
  }
  return count;
}

void SessionDriver::Impl::EvictOldestUnidentified() {
  FrameChannel* oldest = nullptr;
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (channel->unidentified() && (oldest == nullptr || channel->opened_at < oldest->opened_at)) {
      oldest = channel.get();
    }
  }
  if (oldest == nullptr) return;
  ++counters_.unidentified;
  ++counters_.unidentified_evicted;
  oldest->Close(CloseReason::kEvicted);
}

void SessionDriver::Impl::OnChannelConnected(FrameChannel& channel) {
  Dial& dial = dials_[channel.dial_index];
  dial.failures = 0;
  Log(LogLevel::kInfo, "%s: connected to peer %u", options_.log_name, channel.peer);
}

void SessionDriver::Impl::OnChannelClosed(FrameChannel& channel, CloseReason reason) {
  if (channel.dialled) {
    Dial& dial = dials_[channel.dial_index];
    if (channel.opened_at != 0 && reason != CloseReason::kShutdown) {
      Log(LogLevel::kWarning, "%s: link to peer %u lost: %s", options_.log_name, channel.peer,
          internal::CloseReasonName(reason));
    }
    if (channel.established() && !DialUp()) {
      // The give-up clock starts when the last established dialled connection goes down.
      last_dial_up_ = Now();
      ArmDeadline(DeadlineAfter(last_dial_up_, options_.give_up_ns));
    }
    ScheduleReconnect(dial);
  } else if (channel.bound || reason == CloseReason::kOversized ||
             reason == CloseReason::kMalformed) {
    Log(LogLevel::kWarning, "%s: connection of peer %u closed: %s", options_.log_name,
        channel.bound ? channel.peer : 0u, internal::CloseReasonName(reason));
  } else {
    Log(LogLevel::kWarning, "%s: unidentified connection closed: %s", options_.log_name,
        internal::CloseReasonName(reason));
  }
  // Only an established, identified link is news to the session (a failed connect is not).
  if (channel.bound && channel.opened_at != 0 && reason != CloseReason::kReplaced) {
    lost_.push_back(channel.peer);
  }
  channel.opened_at = 0;
}

void SessionDriver::Impl::OnChannelHandled(FrameChannel& channel) {
  if (stopped_) {
    Complete();
    return;
  }
  if (channel.dialled && channel.reusable() && !finishing_) {
    ArmDeadline(dials_[channel.dial_index].next_attempt);  // a reconnect that had to wait
  }
  // A link that closed or a queue that emptied may be what Settle waits for.
  Settle();
}

void SessionDriver::Impl::ScheduleReconnect(Dial& dial) {
  // Exponential backoff with +-50% jitter, so restarted peers do not reconnect in lockstep.
  const std::uint32_t exponent = std::min<std::uint32_t>(dial.failures, 20);
  TimeNs delay = options_.reconnect_min_ns << exponent;
  delay = std::min(delay, options_.reconnect_max_ns);
  const double jitter =
      0.5 + static_cast<double>(NextRandom(jitter_state_) >> 11) * 0x1.0p-53;
  dial.next_attempt = Now() + static_cast<TimeNs>(static_cast<double>(delay) * jitter);
  ++dial.failures;
  ArmDeadline(dial.next_attempt);
}

bool SessionDriver::Impl::Bind(FrameChannel& channel, std::span<const std::byte> frame) {
  const Result<wire::FrameView> view = wire::DecodeFrame(frame, options_.max_frame_bytes);
  const PeerId sender = view.ok() ? view.value().header.sender : 0;
  if (!view.ok() || sender == 0 || sender > options_.max_peer_id) {
    ++counters_.unidentified;
    channel.Close(CloseReason::kUnidentified);
    return false;
  }
  if (options_.auth_keys != nullptr && sender != channel.authenticated_device()) {
    // A key holder claiming another device's id: its key vouches for itself only.
    ++counters_.unidentified;
    ++counters_.auth_rejected;
    Log(LogLevel::kWarning, "%s: device %u sent a frame as peer %u: closing", options_.log_name,
        channel.authenticated_device(), sender);
    channel.Close(CloseReason::kUnauthenticated);
    return false;
  }
  for (const std::unique_ptr<FrameChannel>& other : channels_) {
    if (other.get() != &channel && !other->dialled && other->bound && other->peer == sender &&
        !other->closed()) {
      // A restarted worker: the old link is gone; tell the session before the new frame.
      ++counters_.peers_replaced;
      other->Close(CloseReason::kReplaced);
      in_session_ = true;
      session_->OnPeerLost(sender, Now());
      in_session_ = false;
      AfterSessionCall();
    }
  }
  channel.peer = sender;
  channel.bound = true;
  ++counters_.peers_bound;
  Log(LogLevel::kInfo, "%s: peer %u connected", options_.log_name, sender);
  return true;
}

void SessionDriver::Impl::OnChannelFrame(FrameChannel& channel, std::span<const std::byte> frame) {
  if (stopped_ || draining_) return;
  if (!channel.bound && !Bind(channel, frame)) {
    Settle();
    return;
  }
  in_session_ = true;
  session_->OnFrame(channel.peer, frame, Now());
  in_session_ = false;
  AfterSessionCall();
  Settle();
}

FrameChannel* SessionDriver::Impl::SendChannel(PeerId peer) {
  for (const Dial& dial : dials_) {
    if (dial.channel->peer == peer) return dial.channel;
  }
  FrameChannel* newest = nullptr;
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    if (!channel->dialled && channel->bound && channel->peer == peer && channel->connected() &&
        (newest == nullptr || channel->opened_at > newest->opened_at)) {
      newest = channel.get();
    }
  }
  return newest;
}

template <typename Frame>
void SessionDriver::Impl::Route(protocol::PeerId to, Frame& frame) {
  FrameChannel* channel = SendChannel(to);
  if (channel == nullptr) {
    ++counters_.frames_unroutable;
    return;
  }
  if (channel->Send(frame)) return;
  if (channel->connected()) {
    ++counters_.queue_overflows;
    channel->Close(CloseReason::kQueueOverflow);
  } else {
    ++counters_.frames_unroutable;
  }
}

void SessionDriver::Impl::RouteShared(protocol::PeerId to, std::span<const std::byte> bytes,
                                      SharedFrame*& shared) {
  const FrameChannel* channel = SendChannel(to);
  if (channel != nullptr && channel->CanWriteNow()) {
    Route(to, bytes);
    return;
  }
  if (shared == nullptr) shared = &frames_.Copy(bytes);
  Route(to, *shared);
}

void SessionDriver::Impl::AfterSessionCall() {
  if (after_call_) after_call_();
  if (stopped_) return;  // the hook stopped the driver: nothing more goes out
  // Frames handed out in one go stay valid together, so consecutive frames at the same address
  // are one frame for several peers (a broadcast). A channel that can write at once writes it
  // from the session's bytes; those that must queue it share one copy. A frame waits to be
  // routed until the next one shows whether it is shared.
  protocol::OutgoingFrame frame;
  std::span<const std::byte> last;  // the previous frame's bytes
  protocol::PeerId last_to = 0;     // its peer
  bool waiting = false;             // it is not routed yet
  SharedFrame* shared = nullptr;    // its shared copy, once a channel must queue it
  while (session_->PollFrame(frame)) {
    if (frame.bytes.data() != last.data() || frame.bytes.size() != last.size()) {
      if (waiting) Route(last_to, last);
      if (shared != nullptr) frames_.Release(*shared);
      shared = nullptr;
      waiting = true;
      last_to = frame.to;
      last = frame.bytes;
      continue;
    }
    if (waiting) {
      RouteShared(last_to, last, shared);
      waiting = false;
    }
    RouteShared(frame.to, last, shared);
  }
  if (waiting) Route(last_to, last);
  if (shared != nullptr) frames_.Release(*shared);
  if (session_->Finished() && !finishing_) {
    finishing_ = true;
    finish_deadline_ = DeadlineAfter(Now(), options_.linger_ns);
    ArmDeadline(finish_deadline_);
  }
  ArmSessionTimer();
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

// ---- SessionDriver ----

SessionDriver::SessionDriver() : impl_(std::make_unique<Impl>(nullptr)) {}
SessionDriver::SessionDriver(asio::io_context& io) : impl_(std::make_unique<Impl>(&io)) {}
SessionDriver::~SessionDriver() = default;

bool TlsAvailable() { return EDGESGD_TCP_TLS != 0; }

HostResult<> SessionDriver::Open(const DriverOptions& options) { return impl_->Open(options); }
std::uint16_t SessionDriver::listen_port() const { return impl_->listen_port_; }
void SessionDriver::SetAfterSessionCall(std::function<void()> hook) {
  impl_->after_call_ = std::move(hook);
}
void SessionDriver::Start(protocol::Session& session, DoneCallback on_done) {
  impl_->Start(session, std::move(on_done));
}
DriverStop SessionDriver::Run(protocol::Session& session) { return impl_->Run(session); }
void SessionDriver::RequestStop() { impl_->RequestStop(); }
void SessionDriver::SessionChanged() { impl_->SessionChanged(); }
void SessionDriver::SetMaxFrameBytes(std::size_t bytes) {
  // The channels read the limit from these options at every length prefix.
  impl_->options_.max_frame_bytes = std::min(bytes, wire::kMaxFrameBytes);
}
asio::io_context& SessionDriver::io() { return impl_->io(); }
TimeNs SessionDriver::Now() const { return impl_->Now(); }
const DriverCounters& SessionDriver::counters() const { return impl_->counters_; }

}  // namespace edgesgd::tcp
