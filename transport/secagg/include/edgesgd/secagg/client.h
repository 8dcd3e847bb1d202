#pragma once

// The device's side of one secure-aggregation round (Bonawitz et al., CCS 2017, with the
// neighbour graph of SecAgg+, Bell et al., CCS 2020), sans I/O: each call takes what the server
// sent and fills what to send back. The server only ever learns the sum of the masked inputs of
// the devices that finished; what a device reveals at the end is a share of its neighbours'
// self-mask seeds (whose inputs arrived) or of their mask keys (whose inputs did not), never both
// for one neighbour.
//
// Any failed call aborts the device's round: its secrets are wiped and every later call is
// refused until the next Start. Storage comes from the arena given to Init; no call allocates
// anywhere else, except inside mbed TLS's key agreement (see crypto.h).

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/result.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/messages.h"
#include "edgesgd/secagg/signing.h"

namespace edgesgd::secagg {

struct ClientLimits {
  std::uint32_t max_neighbours = 0;
  // Fewer neighbours than this and the device refuses to mask: a server that isolated it (or the
  // coalition of its few neighbours) could otherwise unmask its input. The run's announced
  // neighbourhood size, less the drop-outs the device accepts.
  std::uint32_t minimum_neighbours = 1;
};

class Client {
 public:
  enum class Phase : std::uint8_t {
    kIdle,            // before Start, or after the round finished
    kKeysAdvertised,  // Start done: waits for the roster
    kSharesSent,      // ShareKeys done: waits for the neighbours' shares
    kSharesReceived,  // waits to mask its input
    kInputMasked,     // waits for the survivor list
    kSurvivorsSigned,  // signed rounds: waits for its neighbours' signatures of the set
    kAborted,
  };

  // Arena bytes Init takes for `limits`.
  static std::size_t ArenaBytes(const ClientLimits& limits);

  // Takes the round's storage for up to limits.max_neighbours neighbours from `arena`.
  // Errors: kInvalidArgument for limits that allow no neighbour; kFailedPrecondition when called
  // twice; the arena's errors (kResourceExhausted when it is smaller than ArenaBytes).
  Status Init(Arena& arena, const ClientLimits& limits);

  // Makes every later round a signed one (signing.h): the advertisement is signed, the roster's
  // keys must carry their owners' signatures, and shares are revealed only after the consistency
  // check (SignSurvivors, then the signed Unmask). `signing`'s objects must outlive the client.
  // A device with signing keys refuses unsigned rounds: a server could otherwise drop the check
  // by not asking for it. Errors: kInvalidArgument when the signer or the verifier is missing.
  Status SetSigning(const DeviceSigning& signing);
  bool signs() const { return signing_.signer != nullptr; }

  // Begins `round` as `device`: fresh key pairs and self-mask seed drawn from `entropy` (32 secret
  // bytes, never reused across rounds). Fills the advertisement to send.
  Status Start(std::uint64_t round, std::uint32_t device, const Key& entropy,
               KeyAdvertisement& advertisement);

  // The roster arrived: the neighbours that advertised keys, this device's own share point and
  // the threshold t. Splits the self-mask seed and the mask private key t-of-(neighbours + 1)
  // and seals each neighbour's pair of shares. Writes one SealedShares per roster entry, in
  // roster order, and the commitment to the self-mask seed; returns the count.
  // Errors: kInvalidArgument / kOutOfRange for a roster or threshold the device refuses (too few
  // or too many neighbours, itself or a repeated id among them, 2t <= neighbours + 1, t greater
  // than neighbours + 1); kUnauthenticated, in signed rounds, for a neighbour's keys its owner did
  // not sign (the server swapped them); kResourceExhausted if `out` is too short.
  Result<std::size_t> ShareKeys(std::uint32_t threshold, std::uint32_t own_share_point,
                                std::span<const RosterEntry> roster, Digest& commitment,
                                std::span<SealedShares> out);

  // The shares its neighbours sealed for it (`device` = the sender). Each must open under the
  // key agreed with that roster neighbour for this round. One that does not (tampered,
  // misaddressed or from another round) is counted (unopened_shares()) and dropped: the device
  // still masks with its sender, which masked with it, but has no share of the sender's to
  // reveal. A bad neighbour or a meddling network thus costs the round at most those shares,
  // never this device's part in it.
  // Errors: kDataLoss for an unknown or repeated sender (the server's lists are wrong).
  Status ReceiveShares(std::span<const SealedShares> delivered);

  // Masks `words` in place: adds PRG(self-mask seed) and, for every neighbour whose shares
  // arrived, +/- PRG(pair seed).
  // Errors: kFailedPrecondition when fewer than t - 1 neighbours shared keys.
  Status MaskInput(std::span<std::uint32_t> words);

  // The survivors (neighbours whose masked inputs arrived) were announced: reveals its own
  // self-mask seed share, the seed shares of the survivors and the mask-key shares of the
  // neighbours that shared keys but did not survive. Returns the count written to `out`; the
  // round is over for this device.
  // Errors: kDataLoss for a survivor that never shared keys with this device or a repeated one;
  // kFailedPrecondition when fewer than t - 1 neighbours survived (a server could be trying to
  // learn one input), or in a signed round (it needs the consistency check);
  // kResourceExhausted if `out` is too short.
  Result<std::size_t> Unmask(std::span<const std::uint32_t> survivors,
                             std::span<RevealedShare> out);

  // Signed rounds, the consistency check. The survivor set arrived: every device whose masked
  // input the server summed, strictly increasing. Signs it (SurvivorsStatement) and keeps it to
  // compare the neighbours' signatures with. Errors: kDataLoss for a set out of order, without
  // this device, or naming a neighbour that never shared keys with it; kFailedPrecondition when
  // fewer than t - 1 neighbours survived, or in an unsigned round; the signer's.
  Status SignSurvivors(std::span<const std::uint32_t> survivors, Signature& signature);

  // Signed rounds: the neighbours' signatures of the survivor set arrived. Reveals as Unmask does
  // once at least t of the neighbourhood (this device included) signed the very set it signed.
  // Errors (the round is aborted, nothing is revealed): kUnauthenticated for a signature that
  // does not verify (an honest server checks each before forwarding it: a bad one means the
  // server lies); kDataLoss for a signer that is not a surviving neighbour, or one named twice;
  // kFailedPrecondition when fewer than t signed; kResourceExhausted if `out` is too short.
  Result<std::size_t> Unmask(std::span<const SurvivorSignature> signatures,
                             std::span<RevealedShare> out);

  // Ends the round early, wiping its secrets (the server aborted, or a deadline passed).
  void Abort();

  Phase phase() const { return phase_; }
  std::uint32_t threshold() const { return threshold_; }
  // The neighbours whose shares arrived (those the input is masked with).
  std::size_t delivered_count() const;
  // Sealed shares that failed to open, since Init.
  std::uint64_t unopened_shares() const { return unopened_shares_; }

 private:
  struct Neighbour {
    RosterEntry entry;
    bool delivered = false;
    bool shares_held = false;  // delivered and opened
    bool survived = false;     // its masked input is in the sum (set at unmasking)
    Key opening_key{};     // opens the neighbour's sealed shares (agreed in ShareKeys)
    Share seed_share;      // this device's share of the neighbour's self-mask seed
    Share mask_key_share;  // ... and of the neighbour's mask private key
  };

  Status Fail(Status status);
  void WipeRound();
  Neighbour* FindNeighbour(std::uint32_t device);
  // Writes its own seed share and one share per neighbour whose shares it holds (the seed's for
  // survivors, the mask key's for the others) and ends the round.
  Result<std::size_t> Reveal(std::span<RevealedShare> out);

  ClientLimits limits_;
  std::span<Neighbour> neighbours_;  // max_neighbours, from Init
  std::span<std::uint32_t> points_;  // scratch: share points, self first
  std::span<Share> scratch_shares_;
  std::size_t neighbour_count_ = 0;
  std::uint64_t round_ = 0;
  std::uint32_t device_ = 0;
  std::uint32_t threshold_ = 0;
  KeyPair cipher_;
  KeyPair mask_;
  Key self_mask_seed_{};
  Key split_key_{};  // seeds the Shamir coefficients
  Share own_seed_share_;
  Phase phase_ = Phase::kIdle;
  bool initialized_ = false;
  DeviceSigning signing_;
  Digest survivors_statement_{};  // signed rounds: the set this device signed
  std::uint64_t unopened_shares_ = 0;
};

}  // namespace edgesgd::secagg
