#pragma once

// Encoding and decoding through a registry (codec_registry.h explains the two kinds of access):
// the operations of the codecs a program registers, as a table of function pointers. Included by
// codec_registry.h; include that.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec_registry.h"

namespace edgesgd {

// The run-time operations of one codec (see the contract in codec.h). Optional hooks are
// nullptr for a codec that does not have them.
struct CodecOps {
  CodecId id = 0;
  Status (*encode)(const CodecParams&, const TensorLayout&, const CodecContext&,
                   std::span<const float>, const PayloadSpans&, std::span<std::byte>) = nullptr;
  Status (*decode_add)(const CodecParams&, const TensorLayout&, const CodecContext&,
                       const PayloadView&, float, std::span<float>,
                       std::span<std::byte>) = nullptr;
  Status (*check_shared)(const CodecParams&, const TensorLayout&, const CodecContext&,
                         const PayloadView&) = nullptr;
  Result<CodecParams> (*round_params)(const CodecParams&, std::uint32_t, std::uint32_t,
                                      std::span<const float>) = nullptr;
  void (*selector_reset)(const CodecParams&, SelectorState&) = nullptr;
  Status (*selector_encode)(const CodecParams&, const TensorLayout&, SelectorState&,
                            std::span<const float>, const PayloadSpans&,
                            std::span<std::byte>) = nullptr;
  Status (*selector_observe)(const CodecParams&, SelectorState&, std::span<const float>,
                             std::uint32_t) = nullptr;
  Status (*selector_observe_change)(const CodecParams&, SelectorState&, std::span<const float>,
                                    std::span<const float>, std::uint32_t) = nullptr;
};

namespace internal {

inline constexpr Status kOtherCodecsParams =
    Status::InvalidArgument("the parameters belong to another codec");

template <typename Codec>
constexpr CodecOps OpsOf() {
  using Params = typename Codec::Params;
  CodecOps ops;
  ops.id = kCodecId<Codec>;
  ops.encode = [](const CodecParams& params, const TensorLayout& layout,
                  const CodecContext& context, std::span<const float> input,
                  const PayloadSpans& out, std::span<std::byte> scratch) {
    const Params* own = std::get_if<Params>(&params);
    return own == nullptr ? kOtherCodecsParams
                          : Codec::Encode(*own, layout, context, input, out, scratch);
  };
  ops.decode_add = [](const CodecParams& params, const TensorLayout& layout,
                      const CodecContext& context, const PayloadView& payload, float weight,
                      std::span<float> accumulator, std::span<std::byte> scratch) {
    const Params* own = std::get_if<Params>(&params);
    return own == nullptr ? kOtherCodecsParams
                          : Codec::DecodeAdd(*own, layout, context, payload, weight, accumulator,
                                             scratch);
  };
  if constexpr (HasSharedCheck<Codec>) {
    ops.check_shared = [](const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload) {
      const Params* own = std::get_if<Params>(&params);
      return own == nullptr ? kOtherCodecsParams
                            : Codec::CheckShared(*own, layout, context, payload);
    };
  }
  if constexpr (HasRoundParams<Codec>) {
    ops.round_params = [](const CodecParams& params, std::uint32_t round, std::uint32_t rounds,
                          std::span<const float> gradient) -> Result<CodecParams> {
      const Params* own = std::get_if<Params>(&params);
      if (own == nullptr) return kOtherCodecsParams;
      EDGESGD_TRY_ASSIGN(const Params chosen, Codec::RoundParams(*own, round, rounds, gradient));
      return CodecParams(chosen);
    };
  }
  if constexpr (HasSelector<Codec>) {
    ops.selector_reset = [](const CodecParams& params, SelectorState& state) {
      if (const Params* own = std::get_if<Params>(&params); own != nullptr) {
        Codec::SelectorReset(*own, state);
      }
    };
    ops.selector_encode = [](const CodecParams& params, const TensorLayout& layout,
                             SelectorState& state, std::span<const float> input,
                             const PayloadSpans& out, std::span<std::byte> scratch) {
      const Params* own = std::get_if<Params>(&params);
      return own == nullptr ? kOtherCodecsParams
                            : Codec::SelectorEncode(*own, layout, state, input, out, scratch);
    };
    ops.selector_observe = [](const CodecParams& params, SelectorState& state,
                              std::span<const float> mean_update, std::uint32_t contributors) {
      const Params* own = std::get_if<Params>(&params);
      return own == nullptr ? kOtherCodecsParams
                            : Codec::SelectorObserve(*own, state, mean_update, contributors);
    };
    ops.selector_observe_change = [](const CodecParams& params, SelectorState& state,
                                     std::span<const float> before,
                                     std::span<const float> after, std::uint32_t contributors) {
      const Params* own = std::get_if<Params>(&params);
      return own == nullptr
                 ? kOtherCodecsParams
                 : Codec::SelectorObserveChange(*own, state, before, after, contributors);
    };
  }
  return ops;
}

}  // namespace internal

// The operations of the given codecs, for a CodecRegistry. Only these codecs' encoders and
// decoders are referenced, so only they are linked.
template <CodecDescriptor... Codecs>
constexpr std::array<CodecOps, sizeof...(Codecs)> MakeCodecOps() {
  static_assert(((kCodecId<Codecs> < kCodecCount) && ...), "register only KnownCodecs");
  static_assert((kCodecInBuild<Codecs> && ...),
                "this build leaves a registered codec out (EDGESGD_CODECS)");
  return {internal::OpsOf<Codecs>()...};
}

// The codecs a program can encode and decode: a view of a table of CodecOps (MakeCodecOps),
// which must outlive it. Lookups scan the table (a handful of entries). Does not allocate.
class CodecRegistry {
 public:
  constexpr explicit CodecRegistry(std::span<const CodecOps> ops) : ops_(ops) {}

  // The operations of codec `id`, or nullptr when this program did not register it.
  constexpr const CodecOps* Find(CodecId id) const {
    for (const CodecOps& ops : ops_) {
      if (ops.id == id) return &ops;
    }
    return nullptr;
  }
  // The operations for `params`. Errors: kFailedPrecondition when their codec is not registered.
  constexpr Result<const CodecOps*> For(const CodecParams& params) const {
    const CodecOps* ops = Find(CodecIdOf(params));
    if (ops == nullptr) {
      return Status::FailedPrecondition("this program does not register the run's codec");
    }
    return ops;
  }
  // Bit k set for every registered codec id k (what a Join advertises).
  constexpr std::uint32_t Mask() const {
    std::uint32_t mask = 0;
    for (const CodecOps& ops : ops_) mask |= std::uint32_t{1} << ops.id;
    return mask;
  }
  constexpr std::span<const CodecOps> ops() const { return ops_; }

  // Encode / DecodeAdd of the codec of `params` (contract in codec.h); kFailedPrecondition for
  // an unregistered codec.
  Status Encode(const CodecParams& params, const TensorLayout& layout,
                const CodecContext& context, std::span<const float> input,
                const PayloadSpans& out, std::span<std::byte> scratch) const {
    EDGESGD_TRY_ASSIGN(const CodecOps* ops, For(params));
    return ops->encode(params, layout, context, input, out, scratch);
  }
  Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                   const CodecContext& context, const PayloadView& payload, float weight,
                   std::span<float> accumulator, std::span<std::byte> scratch) const {
    EDGESGD_TRY_ASSIGN(const CodecOps* ops, For(params));
    return ops->decode_add(params, layout, context, payload, weight, accumulator, scratch);
  }
  // The codec's shared-seed check of a received payload (kOk for codecs without one).
  Status CheckShared(const CodecParams& params, const TensorLayout& layout,
                     const CodecContext& context, const PayloadView& payload) const {
    EDGESGD_TRY_ASSIGN(const CodecOps* ops, For(params));
    return ops->check_shared == nullptr ? Status::Ok()
                                        : ops->check_shared(params, layout, context, payload);
  }
  // The round's parameters (`params` itself for codecs without a per-round choice).
  Result<CodecParams> RoundParams(const CodecParams& params, std::uint32_t round,
                                  std::uint32_t rounds, std::span<const float> gradient) const {
    EDGESGD_TRY_ASSIGN(const CodecOps* ops, For(params));
    return ops->round_params == nullptr ? params
                                        : ops->round_params(params, round, rounds, gradient);
  }

 private:
  std::span<const CodecOps> ops_;
};

namespace internal {
template <typename List>
struct OpsOfList;
template <typename... Codecs>
struct OpsOfList<CodecList<Codecs...>> {
  static constexpr std::size_t kBuiltCount = (std::size_t{kCodecInBuild<Codecs>} + ...);
  template <typename Codec>
  static constexpr void AddIfBuilt(std::array<CodecOps, kBuiltCount>& ops, std::size_t& next) {
    if constexpr (kCodecInBuild<Codec>) ops[next++] = OpsOf<Codec>();
  }
  static constexpr std::array<CodecOps, kBuiltCount> kOps = [] {
    std::array<CodecOps, kBuiltCount> ops{};
    std::size_t next = 0;
    (AddIfBuilt<Codecs>(ops, next), ...);
    return ops;
  }();
};
}  // namespace internal

// How many codecs this build compiles in (kCodecCount unless EDGESGD_CODECS names fewer).
inline constexpr std::size_t kBuiltCodecCount = internal::OpsOfList<KnownCodecs>::kBuiltCount;

// The operations of every codec of this build (links each of them).
const CodecRegistry& AllCodecs();

}  // namespace edgesgd
