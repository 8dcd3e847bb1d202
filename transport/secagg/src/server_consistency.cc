// The server's side of signed rounds (signing.h): the verifier it checks advertisements with,
// and the consistency check between the masked inputs and the unmasking.

#include <algorithm>

#include "edgesgd/secagg/server.h"

namespace edgesgd::secagg {

Status Server::SetVerifier(const Verifier* verifier) {
  if (phase_ != Phase::kIdle && phase_ != Phase::kFinished && phase_ != Phase::kAborted) {
    return Status::FailedPrecondition("a round is open: its signing cannot change");
  }
  verifier_ = verifier;
  return Status::Ok();
}

Status Server::AddSignature(std::uint32_t device, const Signature& signature) {
  if (phase_ != Phase::kCollectingSignatures) {
    return Status::FailedPrecondition("a survivor-set signature arrived outside the check");
  }
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) {
    return Status::NotFound("only devices whose input was summed sign the survivor set");
  }
  if (members_[i].signed_set) return Status::AlreadyExists("the device signed the set twice");
  EDGESGD_TRY(verifier_->Verify(device, survivors_statement_, signature));
  members_[i].set_signature = signature;
  members_[i].signed_set = true;
  return Status::Ok();
}

Status Server::CloseSignatures() {
  if (phase_ != Phase::kCollectingSignatures) {
    return Status::FailedPrecondition("not collecting survivor-set signatures");
  }
  for (std::uint32_t i = 0; i < cohort_size_; ++i) {
    members_[i].active = members_[i].active && members_[i].signed_set;
  }
  // A device reveals only when t of its neighbourhood signed: one short of them would refuse.
  std::size_t remaining = 0;
  for (std::uint32_t i = 0; i < cohort_size_; ++i) {
    if (!members_[i].active) continue;
    const auto list = Neighbours(i);
    const auto signers = static_cast<std::size_t>(std::count_if(
        list.begin(), list.end(), [&](std::uint32_t j) { return members_[j].signed_set; }));
    members_[i].active = signers + 1 >= plan_.threshold;
    remaining += members_[i].active ? 1u : 0u;
  }
  if (remaining < plan_.threshold) {
    return Fail(Status::Unavailable(
        "fewer devices than the threshold signed the survivor set with enough of their "
        "neighbourhood; round aborted"));
  }
  phase_ = Phase::kCollectingUnmasking;
  return Status::Ok();
}

Result<std::size_t> Server::SignaturesFor(std::uint32_t device,
                                          std::span<SurvivorSignature> out) const {
  if (phase_ != Phase::kCollectingUnmasking || !signs()) {
    return Status::FailedPrecondition("no signatures now");
  }
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) {
    return Status::NotFound("the device is not in this round's unmasking");
  }
  std::size_t written = 0;
  for (std::uint32_t j : Neighbours(i)) {
    if (!members_[j].signed_set) continue;
    if (written == out.size()) return Status::ResourceExhausted("the signature buffer is too short");
    out[written++] = SurvivorSignature{members_[j].device, members_[j].set_signature};
  }
  return written;
}

}  // namespace edgesgd::secagg
