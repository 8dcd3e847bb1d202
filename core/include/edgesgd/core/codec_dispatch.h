#pragma once

// Runtime choice of codec through a constexpr table indexed by CodecKind: no virtual functions,
// and shapes and sizes stay usable in constant expressions (static buffers sized with
// static_assert).

#include <array>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/identity.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/codecs/rand_k.h"
#include "edgesgd/core/codecs/reg_top_k.h"
#include "edgesgd/core/codecs/random_block.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/codecs/top_k.h"

namespace edgesgd {

namespace internal {
template <typename Codec>
constexpr CodecOps OpsOf(CodecKind kind) {
  return CodecOps{kind, &Codec::Shape, &Codec::ScratchBytes, &Codec::Encode, &Codec::DecodeAdd};
}
}  // namespace internal

inline constexpr std::array<CodecOps, kCodecCount> kCodecTable = {
    internal::OpsOf<IdentityCodec>(CodecKind::kIdentity),
    internal::OpsOf<TopKCodec>(CodecKind::kTopK),
    internal::OpsOf<RandKCodec>(CodecKind::kRandK),
    internal::OpsOf<RandomBlockCodec>(CodecKind::kRandomBlock),
    internal::OpsOf<SignCodec>(CodecKind::kSign),
    internal::OpsOf<QsgdCodec>(CodecKind::kQsgd),
    // The table's (stateless) Encode is RegTop-k's first round; the posterior lives in
    // RegTopKState, which ErrorFeedbackWorker keeps for this codec.
    internal::OpsOf<RegTopKCodec>(CodecKind::kRegTopK),
};

namespace internal {
constexpr bool TableMatchesEnum() {
  for (std::size_t i = 0; i < kCodecTable.size(); ++i) {
    if (static_cast<std::size_t>(kCodecTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(TableMatchesEnum(), "kCodecTable must be indexed by CodecKind");

constexpr bool IsKnownCodec(CodecKind kind) {
  return static_cast<std::size_t>(kind) < kCodecTable.size();
}
}  // namespace internal

// Exact payload shape for a configuration. Errors: kInvalidArgument.
constexpr Result<PayloadShape> EncodedShape(const CodecParams& params,
                                            const TensorLayout& layout) {
  if (!internal::IsKnownCodec(params.kind)) return Status::InvalidArgument();
  return kCodecTable[static_cast<std::size_t>(params.kind)].shape(params, layout);
}

// Bytes of one encoded payload (all fields), 0 for invalid parameters. For qsgd this is exact
// for `params.qsgd_levels`; size buffers for the largest level count a schedule may pick.
constexpr std::size_t MaxEncodedBytes(const CodecParams& params, const TensorLayout& layout) {
  const Result<PayloadShape> shape = EncodedShape(params, layout);
  return shape.ok() ? shape.value().bytes() : 0;
}

// Scratch bytes Encode and DecodeAdd need; 0 for invalid parameters.
constexpr std::size_t CodecScratchBytes(const CodecParams& params, const TensorLayout& layout) {
  if (!internal::IsKnownCodec(params.kind)) return 0;
  return kCodecTable[static_cast<std::size_t>(params.kind)].scratch_bytes(params, layout);
}

// Runtime-dispatched Encode (see the contract in codec.h).
inline Status Encode(const CodecParams& params, const TensorLayout& layout,
                     const CodecContext& context, std::span<const float> input,
                     const PayloadSpans& out, std::span<std::byte> scratch) {
  if (!internal::IsKnownCodec(params.kind)) return Status::InvalidArgument();
  return kCodecTable[static_cast<std::size_t>(params.kind)].encode(params, layout, context, input,
                                                                   out, scratch);
}

// Runtime-dispatched DecodeAdd (see the contract in codec.h).
inline Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                        const CodecContext& context, const PayloadView& payload, float weight,
                        std::span<float> accumulator, std::span<std::byte> scratch) {
  if (!internal::IsKnownCodec(params.kind)) return Status::InvalidArgument();
  return kCodecTable[static_cast<std::size_t>(params.kind)].decode_add(
      params, layout, context, payload, weight, accumulator, scratch);
}

}  // namespace edgesgd
