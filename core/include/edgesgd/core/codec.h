#pragma once

// The parts every codec descriptor is built from. A codec is one struct in its own files
// (core/include/edgesgd/core/codecs/NAME.h, core/src/codecs/NAME.cc) that describes itself
// completely, and one line in the registry (codec_registry.h) that makes it known:
//
//   struct TopKCodec {
//     using Params = TopKParams;                 // its own parameters, with defaults
//     static constexpr std::string_view kName = "top_k";
//     static constexpr std::string_view kSummary = "...";       // one line for --help
//     static constexpr PayloadLayout kLayout = PayloadLayout::kSparse;
//     static constexpr CodecTraits kTraits{...};
//     static constexpr std::array<ParamField<Params>, N> kFields{...};  // flags, Welcome, checks
//     static constexpr Status Validate(const Params&);            // with a reason
//     static constexpr Result<PayloadShape> Shape(const Params&, const TensorLayout&);
//     static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&);
//     static Status Encode(const Params&, const TensorLayout&, const CodecContext&,
//                          std::span<const float> input, const PayloadSpans& out,
//                          std::span<std::byte> scratch);
//     static Status DecodeAdd(const Params&, const TensorLayout&, const CodecContext&,
//                             const PayloadView& payload, float weight,
//                             std::span<float> accumulator, std::span<std::byte> scratch);
//     // Optional hooks (see the concepts at the end of this file): QuantizedHeaderOf /
//     // ParamsForHeader (kQuantized payloads), RoundParams (per-round choices), CheckShared
//     // (shared-seed choices a receiver can verify), VoteForm (majority vote), KeepsNormBound
//     // (differential privacy's clipping), a stateful Selector.
//   };
//
// Encode compresses `input` (layout.dimension() floats) into the first Shape() elements of each
// field of `out`. DecodeAdd adds weight * decode(payload) to `accumulator`; it verifies the
// payload first (field sizes equal Shape(), indices in range, values finite) and a bad payload
// returns kDataLoss with the accumulator untouched. Errors of both: kInvalidArgument
// (parameters, input size), kResourceExhausted (an output span or the scratch too small),
// kDataLoss (malformed payload). Neither allocates.

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// A codec's number on the wire: its position in the registry's list (codec_registry.h). Never
// reused or reordered; new codecs are appended.
using CodecId = std::uint8_t;

// Where in the run an encode or decode happens. Shared random choices (rand_k indices,
// random_block starts) depend on (seed, round, tensor) only, so every worker and the server derive
// the same ones; private randomness (qsgd dither, natural's rounding) also depends on `worker`.
struct CodecContext {
  std::uint64_t seed = 0;
  std::uint32_t round = 0;
  std::uint32_t worker = 0;
};

// What a codec's payloads can do besides being decoded, for the components that combine them.
struct CodecTraits {
  // Payloads of the same round from different workers describe the same coordinates in the same
  // order, so they can be summed field by field and the sum sent on as a payload (the aggregate
  // downlink without re-compression).
  bool payload_sum = false;
  // A server can compress its mean update again with this codec and keep the rest in its own
  // residual (two-way error feedback): the encoding depends on the input and the round only.
  bool downlink_recompress = false;
  // The consensus step gamma compressed gossip (CHOCO, BEER) takes with this codec when a run
  // gives none: the largest stable step measured on a ring of 16, halved for the biased codecs.
  // 0: never measured, so such a run must choose one.
  float consensus_step = 0.0f;
};

// ---- Parameters as fields ----
//
// Every parameter of a codec is listed once, in its descriptor's kFields. From that list come
// the command-line flags and their help text, the parameters' encoding in the Welcome (one
// 32-bit word each, in list order), the run's checkpoint fingerprint, and the name a refused
// --resume reports.

// How a field's 32-bit word reads.
enum class ParamKind : std::uint8_t {
  kReal,      // a float, stored as its IEEE-754 bits
  kInteger,   // an unsigned 32-bit integer
  kChoice,    // an index into the field's choice names
  kBitWidth,  // a level count written as bits per coordinate: word = levels,
              // flag value b means levels = 2^(b - 1) - 1
};

template <typename Params>
struct ParamField {
  std::string_view name;  // snake_case, e.g. "k_ratio": the flag --k-ratio, TOML key k_ratio
  std::string_view help;  // one line; the codec names are added by whoever prints it
  ParamKind kind = ParamKind::kReal;
  std::span<const std::string_view> choices;  // kChoice: the names of values 0, 1, ...
  std::uint32_t (*get)(const Params&) = nullptr;
  void (*set)(Params&, std::uint32_t) = nullptr;
  // nullptr when the field is read with these parameters; otherwise why it is not (a flag for
  // it given explicitly is then an error rather than silently ignored).
  const char* (*unused_because)(const Params&) = nullptr;
};

namespace internal {
template <typename T>
struct MemberOf;
template <typename Owner, typename Value>
struct MemberOf<Value Owner::*> {
  using Class = Owner;
  using Type = Value;
};

// The kind of a field holding a `Value`: a float is kReal, an enum kChoice, a u32 kInteger.
template <typename Value>
constexpr ParamKind KindOf() {
  if constexpr (std::is_same_v<Value, float>) {
    return ParamKind::kReal;
  } else if constexpr (std::is_enum_v<Value>) {
    return ParamKind::kChoice;
  } else {
    static_assert(std::is_same_v<Value, std::uint32_t>, "fields are float, u32 or enums");
    return ParamKind::kInteger;
  }
}

template <typename Value>
constexpr std::uint32_t ToWord(Value value) {
  if constexpr (std::is_same_v<Value, float>) {
    return std::bit_cast<std::uint32_t>(value);
  } else {
    return static_cast<std::uint32_t>(value);
  }
}
template <typename Value>
constexpr Value FromWord(std::uint32_t word) {
  if constexpr (std::is_same_v<Value, float>) {
    return std::bit_cast<float>(word);
  } else {
    return static_cast<Value>(word);
  }
}
}  // namespace internal

// The field of data member `Member` (a float: kReal; an unsigned integer: kInteger; an enum:
// kChoice over `choices`). `kind` may name kBitWidth for an integer level count.
template <auto Member>
constexpr ParamField<typename internal::MemberOf<decltype(Member)>::Class> Field(
    std::string_view name, std::string_view help, std::span<const std::string_view> choices = {}) {
  using Params = typename internal::MemberOf<decltype(Member)>::Class;
  using Value = typename internal::MemberOf<decltype(Member)>::Type;
  ParamField<Params> field;
  field.name = name;
  field.help = help;
  field.kind = internal::KindOf<Value>();
  field.choices = choices;
  field.get = [](const Params& params) { return internal::ToWord(params.*Member); };
  field.set = [](Params& params, std::uint32_t word) {
    params.*Member = internal::FromWord<Value>(word);
  };
  return field;
}

// As Field, for a field read only when `unused_because(params)` is nullptr.
template <auto Member>
constexpr auto ConditionalField(
    std::string_view name, std::string_view help,
    const char* (*unused_because)(const typename internal::MemberOf<decltype(Member)>::Class&),
    std::span<const std::string_view> choices = {}) {
  auto field = Field<Member>(name, help, choices);
  field.unused_because = unused_because;
  return field;
}

// `field` read as a level count given in bits per coordinate (ParamKind::kBitWidth).
template <typename Params>
constexpr ParamField<Params> AsBitWidth(ParamField<Params> field) {
  field.kind = ParamKind::kBitWidth;
  return field;
}

// The parameters of a codec that has none: an empty struct, a distinct type per codec (`Tag`, the
// codec) so that CodecParams can tell the codecs apart.
template <typename Tag>
struct NoParams {
  friend constexpr bool operator==(const NoParams&, const NoParams&) = default;
};

// What a codec without parameters inherits: no fields, nothing to validate.
template <typename Params>
struct WithoutParameters {
  static constexpr std::array<ParamField<Params>, 0> kFields{};
  static constexpr Status Validate(const Params&) { return Status::Ok(); }
};

// Declares a codec's Encode and DecodeAdd (the contract at the top of this file) for its
// parameter type, inside the descriptor struct.
#define EDGESGD_CODEC_OPERATIONS(ParamsType)                                                     \
  static Status Encode(const ParamsType& params, const TensorLayout& layout,                     \
                       const CodecContext& context, std::span<const float> input,                \
                       const PayloadSpans& out, std::span<std::byte> scratch);                   \
  static Status DecodeAdd(const ParamsType& params, const TensorLayout& layout,                  \
                          const CodecContext& context, const PayloadView& payload, float weight, \
                          std::span<float> accumulator, std::span<std::byte> scratch)

// Most parameter words a codec has (the Welcome reserves this many).
inline constexpr std::size_t kMaxCodecParamWords = 8;

// ---- Helpers shared by codecs ----

// NaN fails every comparison, so these range tests are false for NaN.
constexpr bool PositiveFinite(float value) {
  return value > 0.0f && value <= std::numeric_limits<float>::max();
}
constexpr bool UnitRatio(float value) { return value > 0.0f && value <= 1.0f; }

// Coordinates a sparsifier keeps of a tensor of `size`: round(size * ratio), at least 1 and at
// most `size`. Errors: kInvalidArgument unless 0 < ratio <= 1.
constexpr Result<std::size_t> SparseCount(std::size_t size, float ratio) {
  if (!UnitRatio(ratio)) return Status::InvalidArgument("k ratio must be in (0, 1]");
  const double exact = static_cast<double>(size) * static_cast<double>(ratio);
  auto count = static_cast<std::size_t>(exact + 0.5);
  if (count < 1) count = 1;
  if (count > size) count = size;
  return count;
}

// The payload shape of `layout` as the sum over its tensors of per_tensor(size), which returns a
// PayloadShape or a Result of one (whose error is passed on). Errors: kInvalidArgument for an
// empty layout.
template <typename PerTensor>
constexpr Result<PayloadShape> SumOverTensors(const TensorLayout& layout, PerTensor per_tensor) {
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  PayloadShape sum;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const Result<PayloadShape> tensor = per_tensor(layout.size(t));
    if (!tensor.ok()) return tensor.status();
    sum.indices += tensor.value().indices;
    sum.values += tensor.value().values;
    sum.words += tensor.value().words;
    sum.scales += tensor.value().scales;
  }
  return sum;
}

// The size of the layout's largest tensor.
constexpr std::size_t LargestTensorSize(const TensorLayout& layout) {
  std::size_t largest = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    if (layout.size(t) > largest) largest = layout.size(t);
  }
  return largest;
}

// ---- The descriptor contract and its optional hooks ----

template <typename C>
concept CodecDescriptor = requires(const typename C::Params& params, const TensorLayout& layout) {
  { C::kName } -> std::convertible_to<std::string_view>;
  { C::kSummary } -> std::convertible_to<std::string_view>;
  { C::kLayout } -> std::convertible_to<PayloadLayout>;
  { C::kTraits } -> std::convertible_to<CodecTraits>;
  { C::Validate(params) } -> std::same_as<Status>;
  { C::Shape(params, layout) } -> std::same_as<Result<PayloadShape>>;
  { C::ScratchBytes(params, layout) } -> std::same_as<std::size_t>;
  requires std::equality_comparable<typename C::Params>;
};

// kQuantized payloads carry the level count and bucket they were encoded with:
//   QuantizedHeaderOf(params)          what an encoder with `params` writes
//   ParamsForHeader(configured, header) the parameters to decode a frame with, if the run's
//                                       `configured` parameters allow that header (kDataLoss
//                                       otherwise)
template <typename C>
concept HasQuantizedHeader = requires(const typename C::Params& params,
                                      const QuantizedHeader& header) {
  { C::QuantizedHeaderOf(params) } -> std::same_as<QuantizedHeader>;
  { C::ParamsForHeader(params, header) } -> std::same_as<Result<typename C::Params>>;
};

// Parameters chosen anew each round by the sender from what it is about to send (a quantization
// schedule): RoundParams(params, round, rounds, input) returns the round's parameters, whose
// shape is never larger than Shape(params).
template <typename C>
concept HasRoundParams = requires(const typename C::Params& params, std::span<const float> input) {
  {
    C::RoundParams(params, std::uint32_t{}, std::uint32_t{}, input)
    } -> std::same_as<Result<typename C::Params>>;
};

// Shared-seed choices visible in the payload that a receiver can recompute and must check
// before summing payloads (random_block's block starts). kDataLoss when they differ.
template <typename C>
concept HasSharedCheck = requires(const typename C::Params& params, const TensorLayout& layout,
                                  const CodecContext& context, const PayloadView& payload) {
  { C::CheckShared(params, layout, context, payload) } -> std::same_as<Status>;
};

// Majority vote counts 1-bit votes. VoteForm(params) gives the parameters of a codec whose
// payloads are plain sign votes (sign with unit scales); a codec without it cannot vote.
template <typename C>
concept HasVoteForm = requires(const typename C::Params& params) {
  { C::VoteForm(params) } -> std::same_as<typename C::Params>;
};

// Differential privacy clips the vector a worker compresses to an L2 norm C and relies on the
// decoded payload being no longer than C. KeepsNormBound(params) is true when the codec never
// lengthens its input (up to float rounding): a selection of coordinates without rescaling, or
// a scale no larger than the input's RMS. A codec without it (stochastic rounding, unbiased
// rescaling) cannot be clipped.
template <typename C>
concept HasNormBound = requires(const typename C::Params& params) {
  { C::KeepsNormBound(params) } -> std::same_as<bool>;
};

// A selection that depends on state the sender keeps from round to round (RegTop-k's
// posterior). Error feedback keeps the state (SelectorStateFloats from its arena) and reports
// each round's aggregate to it:
//   SelectorReset(params, state)                   no posterior (also after a missed round)
//   SelectorEncode(params, layout, state, input, out, scratch)     Encode through the state
//   SelectorObserve(params, state, mean_update, contributors)      the round's mean update
//   SelectorObserveChange(params, state, before, after, contributors)   ... as a model change
// Observing with 0 contributors means no aggregate was formed.
struct SelectorState {
  std::span<float> values;  // SelectorStateFloats(params, layout) floats
  bool awaiting_aggregate = false;
};
template <typename C>
concept HasSelector = requires(const typename C::Params& params, const TensorLayout& layout,
                               SelectorState& state, std::span<const float> input,
                               const PayloadSpans& out, std::span<std::byte> scratch) {
  { C::SelectorStateFloats(params, layout) } -> std::same_as<std::size_t>;
  { C::SelectorReset(params, state) } -> std::same_as<void>;
  { C::SelectorEncode(params, layout, state, input, out, scratch) } -> std::same_as<Status>;
  { C::SelectorObserve(params, state, input, std::uint32_t{}) } -> std::same_as<Status>;
  {
    C::SelectorObserveChange(params, state, input, input, std::uint32_t{})
    } -> std::same_as<Status>;
};

}  // namespace edgesgd
