#pragma once

// The server's side of one secure-aggregation round, sans I/O: it collects what devices send in
// each phase, decides at each Close* (the driver's deadline or quorum) who is still in the round,
// and in the end removes the masks from the sum of the inputs that arrived. It sees masked inputs
// and sealed shares only; what it reconstructs are the self-mask seeds of the devices whose input
// it summed and the mask keys of those that shared keys but whose input never came.
//
// Neighbourhoods: every device masks with every other (SecAgg), or, with `neighbours` = k < n - 1,
// with its k neighbours on a randomly permuted ring (the Harary graph of SecAgg+), so a device's
// messages grow with k, not with the cohort. Shares of a device's secrets go to its neighbours
// and itself; t of them reconstruct a secret. A device whose neighbourhood falls below t during
// key exchange leaves the round; when fewer than t devices remain, or a needed secret has fewer
// than t shares at the end, the round is aborted and no sum is produced.
//
// Storage comes from the arena given to Init, sized for the largest cohort, neighbourhood and
// vector; no call allocates anywhere else, except inside mbed TLS's key agreement during Finish
// (see crypto.h).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/result.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/messages.h"
#include "edgesgd/secagg/signing.h"

namespace edgesgd::secagg {

struct ServerLimits {
  std::uint32_t max_devices = 0;
  std::uint32_t max_neighbours = 0;
  std::uint32_t max_words = 0;
};

struct RoundPlan {
  std::uint64_t round = 0;
  std::uint32_t threshold = 0;   // t: shares needed to reconstruct a secret
  std::uint32_t neighbours = 0;  // k (even), or 0 for everyone
  std::uint64_t graph_seed = 0;  // the ring's permutation (server-private randomness)
  std::uint32_t words = 0;       // length of every masked input
};

// The neighbourhood size a plan gives a cohort of n: k, or n - 1 when k is 0 or reaches it.
std::uint32_t NeighbourhoodSize(std::uint32_t cohort, std::uint32_t neighbours);

// Why a plan is refused, or Ok: t must exceed half of (neighbourhood + 1) and not exceed it; k
// must be even; the cohort must have at least two devices.
Status ValidatePlan(const RoundPlan& plan, std::uint32_t cohort);

// Wrong shares of one secret that reconstruction corrects by leaving shares out in turn when
// there are too few spare shares to decode: each more multiplies the combinations tried. With s
// shares beyond the threshold, decoding corrects s / 2 wrong ones whatever their number.
inline constexpr std::uint32_t kMaxWrongShares = 2;

class Server {
 public:
  enum class Phase : std::uint8_t {
    kIdle,
    kCollectingKeys,
    kCollectingShares,
    kCollectingInputs,
    kCollectingSignatures,  // signed rounds: the consistency check
    kCollectingUnmasking,
    kFinished,  // sum() holds the survivors' exact sum
    kAborted,
  };

  // Arena bytes Init takes for `limits`.
  static std::size_t ArenaBytes(const ServerLimits& limits);

  // Takes the storage of the largest round `limits` allow from `arena`. Errors:
  // kInvalidArgument for limits below two devices, one neighbour and one word;
  // kFailedPrecondition when called twice; the arena's errors (kResourceExhausted when it is
  // smaller than ArenaBytes).
  Status Init(Arena& arena, const ServerLimits& limits);

  // Makes the next rounds signed (signing.h) — advertisements must carry their device's signature,
  // and a consistency check runs before the unmasking — or, with null, unsigned. `verifier` must
  // outlive the server. Errors: kFailedPrecondition while a round is open.
  Status SetVerifier(const Verifier* verifier);
  bool signs() const { return verifier_ != nullptr; }

  // Begins a round with the sampled `cohort` (distinct device ids).
  // Errors: kInvalidArgument for a plan ValidatePlan refuses or a repeated id; kOutOfRange for a
  // cohort, neighbourhood or vector larger than Init allowed.
  Status Start(const RoundPlan& plan, std::span<const std::uint32_t> cohort);

  // Phase 0. A second advertisement with other keys replaces the first: the device restarted
  // before anyone saw its keys. Errors (the message is ignored, the round goes on): kNotFound
  // for a device outside the cohort, kAlreadyExists for the same advertisement again,
  // kFailedPrecondition out of phase, kUnauthenticated in a signed round for a signature that
  // does not verify.
  Status AddKeys(std::uint32_t device, const KeyAdvertisement& keys);
  // After phase 0: an advertisement from a device already in the round. Other keys than it
  // advertised mean it restarted and lost its secrets: it leaves the round from this phase on,
  // as a device that vanished does, instead of spoiling it with shares and masks of keys its
  // neighbours never saw. Returns true when it left. Errors: kAlreadyExists for the keys it
  // advertised (a duplicate); kNotFound for a device no longer in the round.
  Result<bool> LeaveIfRestarted(std::uint32_t device, const KeyAdvertisement& keys);
  // Ends phase 0. Errors: kUnavailable when fewer than t devices can go on (round aborted).
  Status CloseKeys();
  // What `device` is sent after phase 0: its share point and its neighbours that advertised keys.
  Result<std::size_t> RosterFor(std::uint32_t device, std::uint32_t& share_point,
                                std::span<RosterEntry> out) const;

  // Phase 1: one SealedShares per roster entry, in roster order, and the seed commitment.
  // Errors as AddKeys, plus kDataLoss for shares that do not match the device's roster.
  Status AddShares(std::uint32_t device, const Digest& commitment,
                   std::span<const SealedShares> shares);
  Status CloseShares();
  // The shares `device`'s neighbours sealed for it (`device` field = sender).
  Result<std::size_t> SharesFor(std::uint32_t device, std::span<SealedShares> out) const;

  // Phase 2: a masked input of plan.words words, added to the running sum. A late input (after
  // CloseInputs) is refused with kFailedPrecondition and never enters the sum.
  Status AddMaskedInput(std::uint32_t device, std::span<const std::uint32_t> words);
  Status CloseInputs();
  // The neighbours of `device` whose inputs were summed; in a signed round, every device whose
  // input was summed (`out` must hold the cohort), in increasing id order.
  Result<std::size_t> SurvivorsFor(std::uint32_t device, std::span<std::uint32_t> out) const;

  // Signed rounds. The device's signature of the survivor set, checked before it is kept.
  // Errors as AddKeys (kUnauthenticated for one that does not verify).
  Status AddSignature(std::uint32_t device, const Signature& signature);
  // Ends the consistency check: a survivor that did not sign, or whose neighbourhood has fewer
  // than t signers (itself included), leaves the unmasking. Errors: kUnavailable when fewer than
  // t devices remain (round aborted).
  Status CloseSignatures();
  // The signatures `device`'s surviving neighbours gave.
  Result<std::size_t> SignaturesFor(std::uint32_t device, std::span<SurvivorSignature> out) const;

  // Phase 3: the device's revealed shares. Errors: kDataLoss when it reveals a share the server
  // did not ask for (a seed share of a device that dropped, a key share of a survivor, a device
  // that is not its neighbour, or one owner twice); nothing of such a message is kept.
  Status AddUnmasking(std::uint32_t device, std::span<const RevealedShare> revealed);
  // Reconstructs the secrets and removes the masks. Errors (round aborted): kUnavailable when a
  // secret has fewer than t shares; kDataLoss when a reconstructed secret does not match its
  // commitment or public key (a device revealed a wrong share).
  Status Finish();

  // Ends the round without a sum (the driver's own reason, e.g. the run is stopping).
  void Abort();

  Phase phase() const { return phase_; }
  const RoundPlan& plan() const { return plan_; }
  // The unmasked sum, valid in kFinished: sum over the survivors' inputs, mod 2^32.
  std::span<const std::uint32_t> sum() const { return {sum_.data(), plan_.words}; }
  std::size_t cohort_size() const { return cohort_size_; }
  std::size_t survivor_count() const;
  bool Survived(std::uint32_t device) const;
  // Devices whose revealed shares did not fit the others this round: reconstruction left their
  // shares out (a device that lies, or one whose memory of the round is damaged).
  std::size_t wrong_revealers() const;
  // Whether the device is still expected to send in the current phase.
  bool Expects(std::uint32_t device) const;
  std::uint32_t neighbourhood_size() const { return degree_; }

 private:
  struct Member {
    std::uint32_t device = 0;
    KeyAdvertisement keys;
    Digest commitment{};
    bool advertised = false;
    bool shared = false;  // in U2 once CloseShares ran
    bool masked = false;
    bool unmasked = false;
    bool active = false;          // still in the round in the current phase
    bool revealed_wrong = false;  // a share it revealed this round did not fit the others
    bool left = false;            // it restarted mid-round: out from then on
    bool signed_set = false;      // signed rounds: its signature of the survivor set arrived
    Signature set_signature{};
  };

  std::uint32_t IndexOf(std::uint32_t device) const;  // cohort_size_ when absent
  std::span<const std::uint32_t> Neighbours(std::uint32_t index) const;
  std::uint32_t SlotOf(std::uint32_t index, std::uint32_t neighbour_index) const;
  std::size_t ActiveNeighbours(std::uint32_t index) const;
  Status PruneAndCheck(const char* too_few);
  Status Fail(Status status);
  // Recovers `owner`'s secret of `kind` from the shares revealed for it and checks it against
  // the owner's commitment (self-mask seed) or public key (mask key, returned as the private
  // key). Uses every share received: decodes them (correcting up to half the spare shares), or
  // leaves out up to kMaxWrongShares of them in turn. The holders of shares found wrong are
  // marked, and their shares go last from then on.
  Status Reconstruct(std::uint32_t owner, SecretKind kind, Key& secret);
  bool SecretMatches(std::uint32_t owner, SecretKind kind, Key& secret) const;
  bool InU2(std::uint32_t index) const { return members_[index].shared; }
  bool InU3(std::uint32_t index) const { return members_[index].shared && members_[index].masked; }

  ServerLimits limits_;
  RoundPlan plan_;
  Phase phase_ = Phase::kIdle;
  std::uint32_t cohort_size_ = 0;
  std::uint32_t degree_ = 0;
  std::span<Member> members_;
  std::span<std::pair<std::uint32_t, std::uint32_t>> by_device_;  // (id, index), sorted
  std::span<std::uint32_t> neighbours_;  // degree_ per member: their indices
  std::span<std::uint32_t> ring_;        // scratch for the permutation
  std::span<SealedShares> outgoing_;     // [sender][slot of receiver]
  std::span<std::uint8_t> outgoing_present_;
  std::span<Share> revealed_;  // [owner][slot of holder; degree_ = owner itself]
  std::span<std::uint8_t> revealed_present_;
  std::span<Share> combine_;  // scratch for reconstruction: the shares held of one secret
  std::span<Share> chosen_;   // ... and the t of them combined
  std::span<FieldElement> decode_scratch_;  // DecodeShares' polynomials
  std::span<std::uint8_t> decode_wrong_;    // ... and its verdict on each share held
  std::span<std::uint32_t> sum_;
  std::span<std::uint32_t> survivor_set_;  // signed rounds: U3's ids, increasing
  std::uint32_t survivor_set_size_ = 0;
  Digest survivors_statement_{};
  const Verifier* verifier_ = nullptr;
  bool initialized_ = false;
};

}  // namespace edgesgd::secagg
