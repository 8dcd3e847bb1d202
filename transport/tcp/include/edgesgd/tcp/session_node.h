#pragma once

// What tcp::Server, tcp::Worker and tcp::Peer share: one protocol session, the memory it takes
// and the SessionDriver that runs it — on the caller's event loop (Start, then run the loop) or
// on one of its own (Run blocks). Each derived class's Open sets the three up.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp {

template <typename SessionType>
class SessionNode {
 public:
  SessionNode(const SessionNode&) = delete;
  SessionNode& operator=(const SessionNode&) = delete;

  // Starts the session on the loop after a successful Open; `on_done` runs on the loop once the
  // node is done (the derived class says when). Call once, from the loop's thread.
  void Start(SessionDriver::DoneCallback on_done) {
    driver_.Start(driven(), [this, on_done = std::move(on_done)](DriverStop stop) {
      stop_ = stop;  // before on_done, which may destroy the node
      if (on_done) on_done(stop);
    });
  }
  // Start, then runs the loop until the node is done (see SessionDriver::Run).
  DriverStop Run() {
    stop_ = driver_.Run(driven());
    return *stop_;
  }
  // Ends the run soon (kStopped): from a callback (the gradient function included) or the
  // loop's thread.
  void Stop() { driver_.RequestStop(); }

  // The bound listening port once open (0 for a node that only dials).
  std::uint16_t listen_port() const { return driver_.listen_port(); }
  // The session: model, round, counters, configuration, outcome.
  const SessionType& session() const { return session_; }
  // The connections' counters.
  const DriverCounters& network_counters() const { return driver_.counters(); }
  // Why the node stopped, once it has (Run returned or Start's on_done ran); empty before.
  std::optional<DriverStop> stop() const { return stop_; }

 protected:
  // On an event loop of its own (Run).
  SessionNode() = default;
  // On the caller's loop `io`, which must outlive the node (see SessionDriver for when a started
  // one may be destroyed).
  explicit SessionNode(asio::io_context& io) : driver_(io) {}
  ~SessionNode() = default;

  // Takes `bytes` of heap memory for the session's arena, left uninitialised so that pages the
  // session never takes are never touched (a generous budget costs what the run uses). Errors:
  // kFailedPrecondition when it already has memory (a second Open: the session keeps pointers
  // into the first).
  HostResult<> TakeMemory(std::size_t bytes) {
    if (arena_) return HostError(Status::FailedPrecondition("already open"));
    memory_.reset(new std::byte[bytes + kArenaAlignment]);
    arena_.emplace(std::span<std::byte>(memory_.get(), bytes + kArenaAlignment));
    return {};
  }
  Arena& arena() { return *arena_; }
  // What the driver runs: the session, or a derived class's wrapper that feeds it another way
  // (a worker on a serial line).
  protocol::Session& driven() { return wrapper_ != nullptr ? *wrapper_ : session_; }

  protocol::Session* wrapper_ = nullptr;

  // Declared in this order: the session points into the arena, the driver at the session.
  std::optional<DriverStop> stop_;
  std::unique_ptr<std::byte[]> memory_;
  std::optional<Arena> arena_;
  SessionType session_;
  SessionDriver driver_;
};

}  // namespace edgesgd::tcp
