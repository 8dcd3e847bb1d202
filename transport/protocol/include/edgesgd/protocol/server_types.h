#pragma once

// What a parameter server is configured with and what it reports: its options, why it rejects
// frames, its round and rejection events, and its counters.

#include <array>
#include <cstddef>
#include <cstdint>

#include "edgesgd/core/random.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/event_log.h"
#include "edgesgd/protocol/session.h"

namespace edgesgd::secagg {
class Verifier;  // edgesgd/secagg/signing.h
}  // namespace edgesgd::secagg

namespace edgesgd::protocol {

// Most workers one server admits (peer ids 1..kMaxWorkers).
inline constexpr std::uint32_t kMaxWorkers = 16384;

// Nanoseconds per second, for writing durations.
inline constexpr TimeNs kNsPerSecond = 1'000'000'000;

struct ServerOptions {
  std::uint32_t workers = 1;  // n, in 1..kMaxWorkers: the run starts when n workers joined
  // q, in 1..n: at the deadline a round closes if at least min(q, live participants) (and at
  // least one) reported; otherwise the server re-sends the broadcast to the participants that
  // have not reported and extends the deadline.
  std::uint32_t quorum = 1;
  TimeNs round_deadline_ns = 30 * kNsPerSecond;  // from the round's start; kNever: no deadline
  // A worker not heard from for this long (any valid frame counts; workers send heartbeats, so
  // keep this a few WorkerOptions::heartbeat_interval_ns) is considered gone: it is no longer
  // sampled or waited for, and any frame from it later brings it back. This is the only thing
  // that detects a device that stops silently (its link never drops): with kNever, only
  // OnPeerLost and Leave remove workers, and a round whose quorum needs a silent worker keeps
  // re-sending to it until it returns.
  TimeNs liveness_timeout_ns = 60 * kNsPerSecond;
  // The server never retries a join itself (workers re-send Join until welcomed); what it can
  // do is stop waiting: after this long since Start, training starts as soon as at least
  // `quorum` live workers have joined. kNever (default): wait for all n.
  TimeNs join_timeout_ns = kNever;
  // The server's 128-bit secret (never all zero) keying differential privacy's central noise
  // (PrivacyMode::kCentral) and cohorts (any private run), and secure aggregation's neighbour
  // graph: drawn from the operating system's entropy by a real deployment, so that no worker
  // can subtract the noise or foresee the cohort or its neighbours; a simulator may derive it
  // from its seed.
  SecretKey noise_key{};
  // Checks the devices' signatures when the run signs its secure rounds
  // (SecureAggregationParams::signed_rounds): the verifying keys the devices got from the same
  // trusted source (`edgesgd keygen`). Must outlive the session.
  const secagg::Verifier* secure_verifier = nullptr;
  // A model whose Euclidean norm exceeds this after a round has diverged: the session finishes
  // with kDataLoss, as it does for a NaN or an infinity, instead of training on. 0: no bound.
  float max_model_norm = 1e6f;
};

// Checks the options. Reasons: workers outside 1..kMaxWorkers, quorum outside 1..workers, a
// zero deadline, liveness timeout or join timeout, a negative or non-finite max_model_norm.
// Does not allocate. Errors: kInvalidArgument.
Status ValidateServerOptions(const ServerOptions& options);

// Why the server dropped a received frame. Every rejection is counted, logged as a RejectEvent
// and otherwise ignored: the round goes on with the other workers.
enum class RejectReason : std::uint8_t {
  kMalformed = 0,      // DecodeFrame failed (truncated, corrupt, misaligned, other version)
  kUnknownSender,      // not a worker peer id, never joined, or header/update id != the link
  kLate,               // an Update for the round that just closed (a straggler)
  kStale,              // an Update for an older round
  kFuture,             // an Update for a round that has not started
  kDuplicate,          // a second Update from the same worker in the round
  kNotSelected,        // an Update from a worker that is not a participant of the round
  kWrongCodec,         // an Update whose codec (or qsgd levels/bucket) is not the run's
  kBadPayload,         // the payload failed verification (sizes, indices, non-finite, starts),
                       // or under central noise was longer than the clipping bound
  kUnexpectedMessage,  // a message a server does not take (Welcome, ModelBroadcast, ...), or
                       // an Update before training started
  kIncompatible,       // a Join from a device that cannot run this configuration (it gets an
                       // Error frame saying why)
};
inline constexpr std::size_t kRejectReasonCount = 11;

// Lower-snake name of a reason ("late"), for logs and metrics; never null.
const char* RejectReasonName(RejectReason reason);

using RejectEvent = RejectEventOf<RejectReason>;

// One closed round, for a metrics row.
struct RoundEvent {
  std::uint32_t round = 0;
  TimeNs time_closed = 0;
  std::uint32_t selected = 0;             // participants (including top-ups)
  std::uint32_t reported = 0;             // accepted updates aggregated
  std::uint32_t rejected = 0;             // frames rejected while this round was open
  std::uint32_t deadline_extensions = 0;  // times the deadline passed below quorum
  std::uint64_t bytes_up = 0;    // cumulative bytes of every frame received (accepted or not)
  std::uint64_t bytes_down = 0;  // cumulative bytes of every frame handed out by PollFrame
  // Bits of the payloads of this round's accepted updates (their fields, not the frames around
  // them): payload_bits / (reported * d) is the round's mean bits per coordinate, which a
  // quantization schedule changes from round to round. SCAFFOLD's control changes count too.
  std::uint64_t payload_bits = 0;
  // A private run's epsilon after this round, at the run's delta (+inf without noise); 0 when
  // the run is not private.
  double epsilon = 0;
  // Why the round was aborted with the model unchanged (a secure round's phase that fell short,
  // with the reason), or kOk.
  Status abort_reason = Status::Ok();
};

struct ServerCounters {
  std::array<std::uint64_t, kRejectReasonCount> rejected{};  // indexed by RejectReason
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t joins = 0;         // first Joins of a worker id
  std::uint64_t rejoins = 0;       // Joins of an id already admitted (resync, restart)
  std::uint64_t workers_lost = 0;  // liveness timeouts, OnPeerLost and Leaves
  std::uint64_t refused_runs = 0;  // Leaves of workers that refused the Welcome's run
  std::uint64_t revivals = 0;      // a lost worker heard from again
  std::uint64_t updates_accepted = 0;
  std::uint64_t rounds_completed = 0;  // closed and applied (a failed apply ends the run)
  std::uint64_t deadline_extensions = 0;
  std::uint64_t top_ups = 0;  // participants added because none of the sampled could report
  std::uint64_t reject_events_dropped = 0;  // overwritten before a driver drained them
  std::uint64_t round_events_dropped = 0;
  // Secure aggregation rounds that ended without a sum (too many devices vanished, a phase's
  // message refused by every holder, ...): the model stayed as it was.
  std::uint64_t secure_rounds_aborted = 0;
  // Secure aggregation messages sent again halfway through a phase to devices that had not
  // answered (their message or its answer may have been lost on the way).
  std::uint64_t secure_messages_resent = 0;
  // Devices that restarted during a secure round (fresh keys after its key phase) and were left
  // out of it, as a device that vanished is.
  std::uint64_t secure_restarts_left = 0;

  std::uint64_t rejected_for(RejectReason reason) const {
    return rejected[static_cast<std::size_t>(reason)];
  }
  std::uint64_t total_rejected() const {
    std::uint64_t total = 0;
    for (const std::uint64_t count : rejected) total += count;
    return total;
  }
};

}  // namespace edgesgd::protocol
