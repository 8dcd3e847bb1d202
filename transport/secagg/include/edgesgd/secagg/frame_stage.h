#pragma once

// Secure aggregation's state machines over the wire: the device's and the server's side of a
// round, each taking decoded SecureAggregation messages (edgesgd/wire/frame_decoder.h) and giving
// the messages to send (FrameBuilder::EncodeSecure). They own the Client or Server and the
// buffers the messages point into, so a session that runs secure aggregation only routes frames
// and decides when a phase closes.
//
//   device                                   server
//   DeviceStage::Start(round, id, entropy,   ServerStage::Start(plan, cohort)
//                      input)  -> Keys  ---> Add(id, Keys) ... Close()
//               Handle(Roster) -> Shares <-- MessageFor(id) = Roster
//                                       ---> Add(id, Shares) ... Close()
//      Handle(DeliveredShares) -> Masked <-- MessageFor(id) = DeliveredShares
//                                       ---> Add(id, MaskedInput) ... Close()
//            Handle(Survivors) -> Unmask <-- MessageFor(id) = Survivors
//                                       ---> Add(id, Unmasking) ... Close(): sum() ready
//
// A signed round (SetSigning / SetVerifier) answers the survivor set with a signature and
// unmasks on the neighbours' signatures:
//       Handle(Survivors) -> Consistency --> Add(id, Consistency) ... Close()
//          Handle(Signatures) -> Unmask <-- MessageFor(id) = Signatures
//
// A message to send points into the stage's buffers (and, for the masked input, into the
// device's masked words) until the stage's next call. Storage comes from the arena at Init;
// after it no call allocates, except inside mbed TLS's key agreement (see crypto.h).

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/result.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/server.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::secagg {

struct DeviceStageLimits {
  ClientLimits client;
  std::uint32_t words = 0;  // length of the masked input
};

class DeviceStage {
 public:
  static std::size_t ArenaBytes(const DeviceStageLimits& limits);

  // Errors: kInvalidArgument for no words; those of Client::Init.
  Status Init(Arena& arena, const DeviceStageLimits& limits);

  // Client::SetSigning: every later round is signed.
  Status SetSigning(const DeviceSigning& signing) { return client_.SetSigning(signing); }

  // Begins `round` as `device` with `input` (limits.words words, copied) and fresh keys from
  // `entropy`; returns the Keys message. A round still open is abandoned.
  // Errors: kInvalidArgument for an input of another length; those of Client::Start.
  Result<wire::SecureMessage> Start(std::uint64_t round, std::uint32_t device, const Key& entropy,
                                    std::span<const std::uint32_t> input);

  // Start with the round's input already written into input() (no copy). Errors: Client::Start's.
  Result<wire::SecureMessage> StartWithInput(std::uint64_t round, std::uint32_t device,
                                             const Key& entropy);
  // Where the next round's input goes (limits.words words); masked in place once the shares
  // arrive.
  std::span<std::uint32_t> input() { return input_; }

  // A server message of the open round; returns the answer: Shares to a Roster, the masked input
  // to the delivered shares, the revealed shares to the survivors (the round is then over) — or,
  // in a signed round, the signature of the survivor set to it and the revealed shares to the
  // neighbours' signatures.
  // Errors: kInvalidArgument for a phase a device never receives; kOutOfRange for more records
  // than limits allow; the client's errors (kFailedPrecondition out of order, kUnauthenticated
  // for a tampered share, ...), after which the round is aborted.
  Result<wire::SecureMessage> Handle(const wire::SecureView& message);

  // Ends the round early (the server moved on), wiping its secrets.
  void Abort() { client_.Abort(); }

  const Client& client() const { return client_; }

 private:
  Result<wire::SecureMessage> ShareKeys(const wire::SecureView& message);
  Result<wire::SecureMessage> MaskInput(const wire::SecureView& message);
  Result<wire::SecureMessage> Unmask(const wire::SecureView& message);
  Result<wire::SecureMessage> SignSurvivors(const wire::SecureView& message);
  Result<wire::SecureMessage> UnmaskSigned(const wire::SecureView& message);

  Client client_;
  std::uint32_t max_neighbours_ = 0;
  std::span<std::uint32_t> input_;
  std::span<RosterEntry> roster_;
  std::span<SealedShares> sealed_;
  std::span<RevealedShare> revealed_;
  std::span<wire::SecureSealedRecord> sealed_records_;
  std::span<wire::SecureShareRecord> revealed_records_;
  std::span<SurvivorSignature> signatures_;
};

class ServerStage {
 public:
  static std::size_t ArenaBytes(const ServerLimits& limits);

  // Errors: those of Server::Init.
  Status Init(Arena& arena, const ServerLimits& limits);

  // Server::SetVerifier: the next rounds are signed (null: unsigned).
  Status SetVerifier(const Verifier* verifier) { return server_.SetVerifier(verifier); }

  // Errors: those of Server::Start.
  Status Start(const RoundPlan& plan, std::span<const std::uint32_t> cohort) {
    return server_.Start(plan, cohort);
  }

  // A device's message of the current phase. Errors (nothing of the message is kept, the round
  // goes on): kFailedPrecondition for a message of another phase; kOutOfRange for more records
  // than limits allow; the server's (kNotFound, kAlreadyExists, kDataLoss, ...).
  Status Add(std::uint32_t device, const wire::SecureView& message);

  // A Keys message after the keys phase: Server::LeaveIfRestarted.
  Result<bool> LeaveIfRestarted(std::uint32_t device, const wire::SecureView& keys) {
    return server_.LeaveIfRestarted(
        device, {keys.fields.cipher_public, keys.fields.mask_public, keys.fields.signature});
  }

  // Closes the phase being collected (at the driver's quorum or deadline): keys, shares, inputs,
  // or — the unmasking — the round itself, after which sum() holds the survivors' sum.
  // Errors: those of Server's Close* and Finish (the round is aborted).
  Status Close();

  // What `device` is sent after the last Close: its Roster, its DeliveredShares, its Survivors or,
  // in a signed round, its neighbours' Signatures.
  // Errors: kFailedPrecondition when nothing is due (no phase closed yet, or the round is over);
  // the server's (kNotFound for a device no longer in the round).
  Result<wire::SecureMessage> MessageFor(std::uint32_t device);

  const Server& server() const { return server_; }
  void Abort() { server_.Abort(); }

 private:
  Server server_;
  std::span<RosterEntry> roster_;
  std::span<SealedShares> sealed_;
  std::span<std::uint32_t> survivors_;
  std::span<RevealedShare> revealed_;
  std::span<wire::SecureRosterRecord> roster_records_;
  std::span<wire::SecureSealedRecord> sealed_records_;
  std::span<SurvivorSignature> signatures_;
  std::span<wire::SecureSignatureRecord> signature_records_;
};

}  // namespace edgesgd::secagg
