#include <cmath>

#include "edgesgd/core/majority_vote.h"
#include "edgesgd/secagg/lanes.h"
#include "update_stage.h"

namespace edgesgd::protocol::internal {

Status Masking::Run(UpdateRound& round) const {
  SecureDevice& secure = *round.secure;
  Status encoded;
  if (secure.levels.lane_bits != 0) {
    encoded = secagg::EncodeQsgdPayloadLevels(secure.levels, round.config.layout,
                                              round.payload.words.first(round.shape.words),
                                              secure.stage.input());
  } else {
    const std::span<const float> values = round.payload.values.first(round.shape.values);
    for (const float value : values) {
      if (!(std::fabs(value) <= secure.format.bound)) ++round.counters.secure_clipped;
    }
    secagg::EncodeFixedPoint(secure.format, values, secure.stage.input());
  }
  if (!encoded.ok()) ++round.counters.encode_errors;
  return encoded;
}

Status VoteMasking::Run(UpdateRound& round) const {
  const std::span<const std::uint32_t> signs =
      round.payload.words.first(MajorityVote::WordsFor(round.config.layout));
  secagg::PackVotes(signs, 32 * signs.size(), round.secure->lane_bits, round.secure->stage.input());
  return Status::Ok();
}

}  // namespace edgesgd::protocol::internal
