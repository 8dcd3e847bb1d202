#pragma once

// The codec registry: the one place a codec is made known (one line in KnownCodecs, in wire-id
// order, append only), and everything that works on "any codec" without naming one.
//
// Two kinds of access:
//   - Parameters (CodecParams, a closed variant of every codec's own Params) and what follows
//     from them alone — names, validation, payload shapes and sizes, traits, the Welcome's
//     parameter words, the fields behind flags and fingerprints — are constexpr functions that
//     visit the variant. They compile to a few comparisons and link no codec's code.
//   - Encoding and decoding go through a CodecRegistry: a table of the operations of the codecs a
//     program registers. A program links only the codecs in its table (a microcontroller image
//     that registers top_k carries no qsgd), like an inference runtime's op resolver. Host
//     programs use AllCodecs(); MakeCodecOps<TopKCodec, ...>() builds a smaller table.
//
// A build may compile fewer codecs than it knows: EDGESGD_CODECS (a CMake cache list, the
// Cortex-M default is identity;top_k;rand_k;random_block;sign) names them. The parameter visits
// then have no branch for the others, so a flash-bound image pays for neither their operations
// nor their parameter code; wire ids stay those of KnownCodecs. Identity, the default of every
// configuration, is always compiled in.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/fp16.h"
#include "edgesgd/core/codecs/identity.h"
#include "edgesgd/core/codecs/natural.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/codecs/rand_k.h"
#include "edgesgd/core/codecs/random_block.h"
#include "edgesgd/core/codecs/reg_top_k.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/codecs/stochastic_sign.h"
#include "edgesgd/core/codecs/top_k.h"

namespace edgesgd {

template <CodecDescriptor... Codecs>
struct CodecList {
  using Params = std::variant<typename Codecs::Params...>;
  static constexpr std::size_t kCount = sizeof...(Codecs);
};

// Every codec edgesgd knows. The position is the codec's CodecId on the wire: append only.
using KnownCodecs = CodecList<IdentityCodec, TopKCodec, RandKCodec, RandomBlockCodec, SignCodec,
                              QsgdCodec, RegTopKCodec, NaturalCodec, Fp16Codec,
                              StochasticSignCodec>;

// The parameters of one codec of KnownCodecs: which codec (index() is its CodecId) and its own
// parameter struct. A run configuration holds one; the default is identity.
using CodecParams = KnownCodecs::Params;
// Codec ids run from 0 to kCodecCount - 1, whether or not this build compiles each codec.
inline constexpr std::size_t kCodecCount = KnownCodecs::kCount;
static_assert(kCodecCount <= 32, "JoinInfo advertises codecs as bits of a u32");

namespace internal {

// The EDGESGD_CODECS compile definition: codec names separated by commas; empty for every codec.
#ifdef EDGESGD_CODECS
inline constexpr std::string_view kBuildCodecNames = EDGESGD_CODECS;
#else
inline constexpr std::string_view kBuildCodecNames;
#endif

// Calls f(name) for each comma-separated name of `list`.
template <typename F>
constexpr void ForEachListedName(std::string_view list, F&& f) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    f(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
}

constexpr bool NamedInBuild(std::string_view name) {
  if (kBuildCodecNames.empty() || name == IdentityCodec::kName) return true;
  bool listed = false;
  ForEachListedName(kBuildCodecNames, [&](std::string_view listed_name) {
    listed |= listed_name == name;
  });
  return listed;
}

}  // namespace internal

// Whether this build compiles `Codec` in (EDGESGD_CODECS).
template <typename Codec>
inline constexpr bool kCodecInBuild = internal::NamedInBuild(Codec::kName);

namespace internal {

template <typename List>
struct BuildMask;
template <typename... Codecs>
struct BuildMask<CodecList<Codecs...>> {
  static constexpr std::array<bool, sizeof...(Codecs)> kBuilt{kCodecInBuild<Codecs>...};
  static constexpr bool kNamesKnown = [] {
    bool known = true;
    ForEachListedName(kBuildCodecNames, [&](std::string_view name) {
      known &= ((name == Codecs::kName) || ...);
    });
    return known;
  }();
};
inline constexpr std::array<bool, kCodecCount> kBuilt = BuildMask<KnownCodecs>::kBuilt;
static_assert(BuildMask<KnownCodecs>::kNamesKnown,
              "EDGESGD_CODECS names a codec edgesgd does not know");

constexpr bool EveryCodecBuilt() {
  for (const bool built : kBuilt) {
    if (!built) return false;
  }
  return true;
}
constexpr std::size_t LastBuiltIndex() {
  std::size_t last = 0;
  for (std::size_t i = 0; i < kCodecCount; ++i) {
    if (kBuilt[i]) last = i;
  }
  return last;
}

// Parameters of a codec this build leaves out reach a visit only if a program built them by
// hand: no name, id or Welcome produces them. Such a program stops here, loudly.
[[noreturn]] void CodecLeftOutOfBuild();

template <typename Params, typename... Codecs>
struct CodecForImpl;
template <typename Params, typename First, typename... Rest>
struct CodecForImpl<Params, First, Rest...> {
  using Type = std::conditional_t<std::is_same_v<Params, typename First::Params>, First,
                                  typename CodecForImpl<Params, Rest...>::Type>;
};
template <typename Params>
struct CodecForImpl<Params> {
  using Type = void;
};
template <typename Params, typename List>
struct CodecForList;
template <typename Params, typename... Codecs>
struct CodecForList<Params, CodecList<Codecs...>> {
  using Type = typename CodecForImpl<Params, Codecs...>::Type;
};

template <typename Codec, typename List>
struct IndexOf;
template <typename Codec, typename... Codecs>
struct IndexOf<Codec, CodecList<Codecs...>> {
  static constexpr std::size_t Find() {
    constexpr bool matches[] = {std::is_same_v<Codec, Codecs>...};
    for (std::size_t i = 0; i < sizeof...(Codecs); ++i) {
      if (matches[i]) return i;
    }
    return sizeof...(Codecs);
  }
  static constexpr std::size_t kValue = Find();
};

template <typename List>
struct ForEachCodecImpl;
template <typename... Codecs>
struct ForEachCodecImpl<CodecList<Codecs...>> {
  template <typename F>
  static constexpr void Run(F&& f) {
    (RunIfBuilt<Codecs>(f), ...);
  }
  template <typename Codec, typename F>
  static constexpr void RunIfBuilt(F& f) {
    if constexpr (kCodecInBuild<Codec>) f(std::type_identity<Codec>{});
  }
};

// Alternative I of `params`, which holds it (checked by the caller). At run time get_if rather
// than get: no bad_variant_access path to link on a microcontroller. In constant evaluation get,
// because GCC 12 does not fold get_if's null test on the address of a temporary.
template <std::size_t I>
constexpr const std::variant_alternative_t<I, CodecParams>& Alternative(const CodecParams& params) {
  if (std::is_constant_evaluated()) return std::get<I>(params);
  const auto* own = std::get_if<I>(&params);
  if (own == nullptr) __builtin_unreachable();
  return *own;
}

// Calls f(params as its own type) for the alternative `params` holds and returns its result.
// Only the codecs of this build have a branch.
template <std::size_t I = 0, typename F>
constexpr decltype(auto) VisitParams(const CodecParams& params, F&& f) {
  if constexpr (!kBuilt[I]) {
    return VisitParams<I + 1>(params, std::forward<F>(f));
  } else if constexpr (I == LastBuiltIndex()) {
    if constexpr (!EveryCodecBuilt()) {
      if (params.index() != I) CodecLeftOutOfBuild();
    }
    return f(Alternative<I>(params));
  } else {
    if (params.index() == I) return f(Alternative<I>(params));
    return VisitParams<I + 1>(params, std::forward<F>(f));
  }
}

}  // namespace internal

// The codec whose parameter struct is `Params`.
template <typename Params>
using CodecFor = typename internal::CodecForList<Params, KnownCodecs>::Type;

// The wire id of a known codec.
template <typename Codec>
inline constexpr CodecId kCodecId = static_cast<CodecId>(internal::IndexOf<Codec, KnownCodecs>::kValue);

// Calls f(std::type_identity<Codec>{}) for every codec of this build, in id order.
template <typename F>
constexpr void ForEachCodec(F&& f) {
  internal::ForEachCodecImpl<KnownCodecs>::Run(std::forward<F>(f));
}

// Calls f.template operator()<Codec>(params as Codec::Params) and returns its result.
template <typename F>
constexpr decltype(auto) VisitCodec(const CodecParams& params, F&& f) {
  return internal::VisitParams(params, [&f](const auto& own) -> decltype(auto) {
    using Codec = CodecFor<std::remove_cvref_t<decltype(own)>>;
    return f.template operator()<Codec>(own);
  });
}

// ---- What follows from the parameters alone ----

constexpr CodecId CodecIdOf(const CodecParams& params) {
  return static_cast<CodecId>(params.index());
}

// Lower-snake name used by the CLI, logs and docs ("top_k"); "unknown" for an id no codec has.
constexpr std::string_view CodecName(CodecId id) {
  std::string_view name = "unknown";
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    if (kCodecId<Codec> == id) name = Codec::kName;
  });
  return name;
}
constexpr std::string_view CodecName(const CodecParams& params) {
  return CodecName(CodecIdOf(params));
}

// The default parameters of the codec with wire id `id`. Errors: kNotFound.
constexpr Result<CodecParams> DefaultCodecParams(CodecId id) {
  Result<CodecParams> found = Status::NotFound("no codec of this build has this id");
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    if (kCodecId<Codec> == id) found = CodecParams(typename Codec::Params{});
  });
  return found;
}
// The default parameters of the codec named `name`. Errors: kNotFound.
constexpr Result<CodecParams> DefaultCodecParams(std::string_view name) {
  Result<CodecParams> found = Status::NotFound("no codec of this build has this name");
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    if (Codec::kName == name) found = CodecParams(typename Codec::Params{});
  });
  return found;
}

// Checks the parameters; the reason names what is wrong. Errors: kInvalidArgument.
constexpr Status ValidateCodecParams(const CodecParams& params) {
  return VisitCodec(params, []<typename Codec>(const typename Codec::Params& own) {
    return Codec::Validate(own);
  });
}

// Exact element counts of one payload. Errors: kInvalidArgument (parameters, empty layout).
namespace internal {
// EncodedShape's visit of every codec, compiled once (codec_registry.cc): inlined into each
// caller it would be copied into each, and images count every byte.
Result<PayloadShape> EncodedShapeOutOfLine(const CodecParams& params, const TensorLayout& layout);
}  // namespace internal

constexpr Result<PayloadShape> EncodedShape(const CodecParams& params, const TensorLayout& layout) {
  if (!std::is_constant_evaluated()) return internal::EncodedShapeOutOfLine(params, layout);
  return VisitCodec(params, [&layout]<typename Codec>(const typename Codec::Params& own) {
    return Codec::Shape(own, layout);
  });
}

// Bytes of one encoded payload (all fields), 0 for invalid parameters. For qsgd with the dq
// schedule, the widest round's.
constexpr std::size_t MaxEncodedBytes(const CodecParams& params, const TensorLayout& layout) {
  const Result<PayloadShape> shape = EncodedShape(params, layout);
  return shape.ok() ? shape.value().bytes() : 0;
}

// Scratch bytes Encode and DecodeAdd need; 0 for invalid parameters.
constexpr std::size_t CodecScratchBytes(const CodecParams& params, const TensorLayout& layout) {
  return VisitCodec(params, [&layout]<typename Codec>(const typename Codec::Params& own) {
    return Codec::ScratchBytes(own, layout);
  });
}

// Floats of selector state a sender keeps across rounds (0 for stateless codecs).
constexpr std::size_t SelectorStateFloats(const CodecParams& params, const TensorLayout& layout) {
  return VisitCodec(params,
                    [&layout]<typename Codec>(const typename Codec::Params& own) -> std::size_t {
                      if constexpr (HasSelector<Codec>) {
                        return Codec::SelectorStateFloats(own, layout);
                      } else {
                        return 0;
                      }
                    });
}

constexpr PayloadLayout PayloadLayoutOf(const CodecParams& params) {
  return VisitCodec(params, []<typename Codec>(const typename Codec::Params&) {
    return Codec::kLayout;
  });
}

constexpr CodecTraits TraitsOf(const CodecParams& params) {
  return VisitCodec(params, []<typename Codec>(const typename Codec::Params&) {
    return Codec::kTraits;
  });
}

// What a kQuantized payload encoded with `params` says about itself; zeros for other layouts.
constexpr QuantizedHeader QuantizedHeaderOf(const CodecParams& params) {
  return VisitCodec(params, []<typename Codec>(const typename Codec::Params& own) {
    if constexpr (HasQuantizedHeader<Codec>) {
      return Codec::QuantizedHeaderOf(own);
    } else {
      return QuantizedHeader{};
    }
  });
}

// The parameters to decode a received payload with: the run's `configured` parameters, checked
// against the codec id, payload layout and (kQuantized) header the payload names. Errors:
// kDataLoss with the reason (another codec, another layout, a header the run cannot produce).
constexpr Result<CodecParams> ParamsForPayload(const CodecParams& configured, CodecId codec,
                                               PayloadLayout layout,
                                               const QuantizedHeader& header) {
  if (codec != CodecIdOf(configured)) return Status::DataLoss("a payload of another codec");
  if (layout != PayloadLayoutOf(configured)) {
    return Status::DataLoss("a payload laid out for another codec");
  }
  return VisitCodec(configured,
                    [&header]<typename Codec>(const typename Codec::Params& own)
                        -> Result<CodecParams> {
                      if constexpr (HasQuantizedHeader<Codec>) {
                        EDGESGD_TRY_ASSIGN(const typename Codec::Params params,
                                           Codec::ParamsForHeader(own, header));
                        return CodecParams(params);
                      } else {
                        return CodecParams(own);
                      }
                    });
}

// The parameters of a codec whose payloads are plain sign votes (majority vote). Errors:
// kInvalidArgument for a codec that cannot vote.
constexpr Result<CodecParams> VoteForm(const CodecParams& params) {
  return VisitCodec(params,
                    []<typename Codec>(const typename Codec::Params& own) -> Result<CodecParams> {
                      if constexpr (HasVoteForm<Codec>) {
                        return CodecParams(Codec::VoteForm(own));
                      } else {
                        return Status::InvalidArgument(
                            "majority vote counts 1-bit votes: it needs the sign codec");
                      }
                    });
}

// Whether the configured codec's payloads are never longer (L2) than the vector it encodes
// (HasNormBound): what clipping for differential privacy needs.
constexpr bool KeepsNormBound(const CodecParams& params) {
  return VisitCodec(params, []<typename Codec>(const typename Codec::Params& own) {
    if constexpr (HasNormBound<Codec>) {
      return Codec::KeepsNormBound(own);
    } else {
      return false;
    }
  });
}

// ---- Parameter fields ----

// One parameter of a configured codec, as every consumer of fields sees it.
struct CodecFieldValue {
  std::string_view name;
  ParamKind kind = ParamKind::kReal;
  std::span<const std::string_view> choices;
  std::uint32_t word = 0;
  const char* unused_because = nullptr;  // nullptr when these parameters read the field
};

// Calls f(const CodecFieldValue&) for every field of the configured codec, in its list order.
template <typename F>
constexpr void ForEachParamField(const CodecParams& params, F&& f) {
  VisitCodec(params, [&f]<typename Codec>(const typename Codec::Params& own) {
    for (const ParamField<typename Codec::Params>& field : Codec::kFields) {
      f(CodecFieldValue{field.name, field.kind, field.choices, field.get(own),
                        field.unused_because != nullptr ? field.unused_because(own) : nullptr});
    }
  });
}

namespace internal {
// The word accessors of a codec's fields, taken from kFields at compile time: the Welcome's
// words need only these, and reading them here keeps kFields' names and help text (which the
// flags and reports print) out of images that never print them.
template <typename Codec>
struct FieldWords {
  using Params = typename Codec::Params;
  static constexpr std::size_t kCount = Codec::kFields.size();
  static constexpr std::array<std::uint32_t (*)(const Params&), kCount> kGet = [] {
    std::array<std::uint32_t (*)(const Params&), kCount> get{};
    for (std::size_t i = 0; i < kCount; ++i) get[i] = Codec::kFields[i].get;
    return get;
  }();
  static constexpr std::array<void (*)(Params&, std::uint32_t), kCount> kSet = [] {
    std::array<void (*)(Params&, std::uint32_t), kCount> set{};
    for (std::size_t i = 0; i < kCount; ++i) set[i] = Codec::kFields[i].set;
    return set;
  }();
};
}  // namespace internal

// The parameters as the Welcome carries them: one word per field, in list order, written into
// `words` (at least kMaxCodecParamWords). Returns how many were written.
constexpr std::size_t ParamWords(const CodecParams& params, std::span<std::uint32_t> words) {
  return VisitCodec(params, [words]<typename Codec>(const typename Codec::Params& own) {
    using Fields = internal::FieldWords<Codec>;
    for (std::size_t i = 0; i < Fields::kCount && i < words.size(); ++i) {
      words[i] = Fields::kGet[i](own);
    }
    return Fields::kCount;
  });
}

// Whether `a` and `b` are the same codec with the same parameter bits (a NaN equals itself, so
// a configuration always compares equal to its own copy).
constexpr bool SameCodecParams(const CodecParams& a, const CodecParams& b) {
  if (CodecIdOf(a) != CodecIdOf(b)) return false;
  std::array<std::uint32_t, kMaxCodecParamWords> words_a{};
  std::array<std::uint32_t, kMaxCodecParamWords> words_b{};
  ParamWords(a, words_a);
  ParamWords(b, words_b);
  return words_a == words_b;
}

// The parameters of codec `id` from its Welcome words, validated. Errors: kNotFound (no codec
// has the id), kDataLoss (a word count other than the codec's field count), and the codec's
// kInvalidArgument with its reason for values outside their domain.
constexpr Result<CodecParams> ParamsFromWords(CodecId id, std::span<const std::uint32_t> words) {
  // One pass over the codecs that fills the variant in place: small on a microcontroller.
  Status status = Status::NotFound("no codec of this build has this id");
  CodecParams params;
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    if (kCodecId<Codec> != id) return;
    using Fields = internal::FieldWords<Codec>;
    if (words.size() != Fields::kCount) {
      status = Status::DataLoss("the codec's parameter count does not match");
      return;
    }
    auto& own = params.template emplace<typename Codec::Params>();
    for (std::size_t i = 0; i < words.size(); ++i) Fields::kSet[i](own, words[i]);
    status = Codec::Validate(own);
  });
  if (!status.ok()) return status;
  return params;
}

static_assert(
    [] {
      bool fits = true;
      ForEachCodec([&](auto codec) {
        fits &= decltype(codec)::type::kFields.size() <= kMaxCodecParamWords;
      });
      return fits;
    }(),
    "a codec has more parameters than a Welcome carries");

}  // namespace edgesgd

// The operations half of the registry (CodecOps, CodecRegistry, MakeCodecOps, AllCodecs).
#include "edgesgd/core/codec_operations.h"  // IWYU pragma: export
