#include "edgesgd/tcp/session_driver.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "edgesgd/platform/log.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/wire/frame_decoder.h"
#include "resolve.h"
#include "session_driver_impl.h"

namespace edgesgd::tcp {

using internal::Resolve;

const char* DriverStopName(DriverStop stop) {
  switch (stop) {
    case DriverStop::kFinished: return "finished";
    case DriverStop::kSignal: return "interrupted by a signal";
    case DriverStop::kGaveUp: return "no connection for the give-up time";
    case DriverStop::kStopped: return "stopped";
  }
  return "?";
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
