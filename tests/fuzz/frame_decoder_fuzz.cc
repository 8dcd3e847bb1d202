// Fuzz target: the wire frame decoder, and every codec's DecodeAdd on the payloads it returns.
//
// Input: a DecoderSetup (fuzz_scripts.h: the receiver's layout, codec parameters and context),
// then the frame's bytes. Invariants:
//   - DecodeFrame is deterministic and a decoded frame is self-consistent: its length prefix
//     gives the frame's size, and every payload span and the Error reason lie inside the frame;
//   - whatever a control or secure aggregation frame decodes to is within the schema: the frame
//     builder encodes it again (it refuses enums outside the schema, invalid codec parameters,
//     empty layouts), the result decodes to the same message, and encoding that gives the same
//     bytes;
//   - DecodeAdd of a payload (with the parameters ParamsForPayload derives, as a receiver does,
//     and optionally with mismatched ones): a failure leaves the accumulator's bytes untouched;
//     a success is deterministic (a second accumulator with the same start, with scratch
//     holding other garbage, ends with the same bytes);
//   - CheckShared is deterministic.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"

namespace edgesgd::fuzz {
namespace {

// Largest scratch and accumulator the harness sets up (larger requests are skipped).
constexpr std::size_t kMaxScratchBytes = std::size_t{8} << 20;

bool Inside(std::span<const std::byte> frame, const void* data, std::size_t bytes) {
  if (bytes == 0) return true;
  const auto begin = reinterpret_cast<std::uintptr_t>(frame.data());
  const auto at = reinterpret_cast<std::uintptr_t>(data);
  return at >= begin && at - begin <= frame.size() && bytes <= frame.size() - (at - begin);
}

template <typename T>
bool SpanInside(std::span<const std::byte> frame, std::span<const T> span) {
  return Inside(frame, span.data(), span.size_bytes());
}

bool SameView(const PayloadView& a, const PayloadView& b) {
  return a.indices.data() == b.indices.data() && a.indices.size() == b.indices.size() &&
         a.values.data() == b.values.data() && a.values.size() == b.values.size() &&
         a.words.data() == b.words.data() && a.words.size() == b.words.size() &&
         a.scales.data() == b.scales.data() && a.scales.size() == b.scales.size();
}

// An accumulator's starting contents: ordinary values, zeros of both signs and large ones (a
// decoder must add to whatever is there).
void FillAccumulator(std::span<float> accumulator) {
  for (std::size_t i = 0; i < accumulator.size(); ++i) {
    switch (i % 5) {
      case 0:
        accumulator[i] = 0.0f;
        break;
      case 1:
        accumulator[i] = -0.0f;
        break;
      case 2:
        accumulator[i] = 1.5f * static_cast<float>(i);
        break;
      case 3:
        accumulator[i] = -3.0e30f;
        break;
      default:
        accumulator[i] = 1.0f / static_cast<float>(i + 1);
        break;
    }
  }
}

// Storage for a scratch span of `bytes` at 16-byte alignment (what codecs expect of an arena).
std::span<std::byte> Scratch(std::vector<std::uint64_t>& storage, std::size_t bytes,
                             std::uint8_t fill) {
  storage.assign(bytes / 8 + 3, 0);
  auto* base = reinterpret_cast<std::byte*>(storage.data());
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  base += (16 - address % 16) % 16;
  std::memset(base, fill, bytes);
  return std::span<std::byte>(base, bytes);
}

// Runs DecodeAdd of `params` twice from the same start and checks the invariants.
void CheckDecodeAdd(const CodecParams& params, const TensorLayout& layout,
                    const CodecContext& context, const PayloadView& view, float weight) {
  const std::size_t scratch_bytes = CodecScratchBytes(params, layout);
  if (scratch_bytes > kMaxScratchBytes) return;
  const std::size_t d = layout.dimension();

  std::vector<float> accumulator(d);
  FillAccumulator(accumulator);
  const std::vector<float> before = accumulator;
  std::vector<std::uint64_t> scratch_storage;
  const Status first = AllCodecs().DecodeAdd(params, layout, context, view, weight, accumulator,
                                             Scratch(scratch_storage, scratch_bytes, 0x00));
  if (!first.ok()) {
    EDGESGD_FUZZ_CHECK(std::memcmp(accumulator.data(), before.data(), 4 * d) == 0,
                       "a failed DecodeAdd leaves the accumulator untouched");
  }

  std::vector<float> again(d);
  FillAccumulator(again);
  const Status second = AllCodecs().DecodeAdd(params, layout, context, view, weight, again,
                                              Scratch(scratch_storage, scratch_bytes, 0xA5));
  EDGESGD_FUZZ_CHECK(first.code() == second.code(), "DecodeAdd's verdict is deterministic");
  EDGESGD_FUZZ_CHECK(std::memcmp(accumulator.data(), again.data(), 4 * d) == 0,
                     "DecodeAdd's result is deterministic (and independent of scratch contents)");

  const Status shared_first = AllCodecs().CheckShared(params, layout, context, view);
  const Status shared_second = AllCodecs().CheckShared(params, layout, context, view);
  EDGESGD_FUZZ_CHECK(shared_first.code() == shared_second.code(), "CheckShared is deterministic");
}

// A secure aggregation message's lists copied out of its frame, as the builder takes them.
struct SecureLists {
  std::vector<wire::SecureRosterRecord> roster;
  std::vector<wire::SecureSealedRecord> shares;
  std::vector<wire::SecureShareRecord> revealed;
  std::vector<wire::SecureSignatureRecord> signatures;

  template <typename Record>
  static std::vector<Record> Copy(const wire::SecureRecords<Record>& records) {
    std::vector<Record> out(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) out[i] = records[i];
    return out;
  }
  explicit SecureLists(const wire::SecureView& view)
      : roster(Copy(view.roster)),
        shares(Copy(view.shares)),
        revealed(Copy(view.revealed)),
        signatures(Copy(view.signatures)) {}
  bool operator==(const SecureLists&) const = default;
};

// Encodes the control or secure aggregation message of `view` with the frame builder into
// `storage`; empty if the builder refuses it.
std::span<const std::byte> Reencode(const wire::FrameView& view,
                                    std::vector<std::uint64_t>& storage) {
  const SecureLists lists(view.secure);
  // The decoded frame's size bounds a secure message's (its lists take what they took there).
  const std::size_t secure_bytes = 4 * (view.secure.masked.size() + view.secure.survivors.size()) +
                                   wire::kSecureRosterRecordBytes * lists.roster.size() +
                                   wire::kSecureSealedRecordBytes * lists.shares.size() +
                                   wire::kSecureShareRecordBytes * lists.revealed.size() +
                                   wire::kSecureSignatureRecordBytes * lists.signatures.size() +
                                   wire::kSecureFrameOverheadBytes;
  storage.assign((wire::kMaxControlFrameBytes + secure_bytes + wire::kBuilderScratchBytes) / 8 + 2,
                 0);
  wire::FrameBuilder builder(std::as_writable_bytes(std::span(storage)));
  Result<std::span<const std::byte>> frame = Status::Internal("not a control frame");
  switch (view.kind) {
    case wire::MessageKind::kJoin:
      frame = builder.EncodeJoin(view.header, view.join);
      break;
    case wire::MessageKind::kWelcome:
      frame = builder.EncodeWelcome(view.header, view.welcome);
      break;
    case wire::MessageKind::kHeartbeat:
      frame = builder.EncodeHeartbeat(view.header, view.heartbeat);
      break;
    case wire::MessageKind::kLeave:
      frame = builder.EncodeLeave(view.header, view.leave);
      break;
    case wire::MessageKind::kError:
      frame = builder.EncodeError(view.header, view.error);
      break;
    case wire::MessageKind::kSecureAggregation:
      frame = builder.EncodeSecure(
          view.header, {view.secure.fields, lists.roster, lists.shares, view.secure.masked,
                        view.secure.survivors, lists.revealed, lists.signatures});
      break;
    default:
      break;
  }
  return frame.ok() ? frame.value() : std::span<const std::byte>();
}

// The control message of `view` survives encoding: it is within the schema.
void CheckReencodes(const wire::FrameView& view) {
  std::vector<std::uint64_t> first_storage;
  const std::span<const std::byte> first = Reencode(view, first_storage);
  EDGESGD_FUZZ_CHECK(!first.empty(), "a decoded control message encodes again");
  const Result<wire::FrameView> again = wire::DecodeFrame(first);
  EDGESGD_FUZZ_CHECK(again.ok(), "a re-encoded control message decodes");
  const wire::FrameView& second = again.value();
  EDGESGD_FUZZ_CHECK(second.kind == view.kind && second.header == view.header,
                     "a re-encoded control message keeps its kind and header");
  switch (view.kind) {
    case wire::MessageKind::kJoin:
      EDGESGD_FUZZ_CHECK(second.join == view.join, "a Join re-encodes to the same values");
      break;
    case wire::MessageKind::kHeartbeat:
      EDGESGD_FUZZ_CHECK(second.heartbeat == view.heartbeat,
                         "a Heartbeat re-encodes to the same values");
      break;
    case wire::MessageKind::kLeave:
      EDGESGD_FUZZ_CHECK(second.leave == view.leave, "a Leave re-encodes to the same values");
      break;
    case wire::MessageKind::kError:
      EDGESGD_FUZZ_CHECK(
          second.error.code == view.error.code && second.error.reason == view.error.reason,
          "an Error re-encodes to the same values");
      break;
    case wire::MessageKind::kSecureAggregation: {
      const wire::SecureView& a = view.secure;
      const wire::SecureView& b = second.secure;
      EDGESGD_FUZZ_CHECK(
          a.fields == b.fields && SecureLists(a) == SecureLists(b) &&
              std::equal(a.masked.begin(), a.masked.end(), b.masked.begin(), b.masked.end()) &&
              std::equal(a.survivors.begin(), a.survivors.end(), b.survivors.begin(),
                         b.survivors.end()),
          "a secure aggregation message re-encodes to the same values");
      break;
    }
    case wire::MessageKind::kWelcome:
      // Floats may be NaN, which == does not match: compare the bytes of a second encoding.
      EDGESGD_FUZZ_CHECK(second.welcome.layout == view.welcome.layout &&
                             SameCodecParams(second.welcome.codec, view.welcome.codec),
                         "a Welcome re-encodes to the same layout and codec");
      break;
    default:
      break;
  }
  std::vector<std::uint64_t> second_storage;
  const std::span<const std::byte> third = Reencode(second, second_storage);
  EDGESGD_FUZZ_CHECK(
      third.size() == first.size() && std::memcmp(third.data(), first.data(), first.size()) == 0,
      "encoding a decoded control message is a fixed point");
}

void Run(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const DecoderSetup setup = DecoderSetup::Read(in);
  const std::span<const std::byte> raw = in.Rest();
  AlignedBytes storage;
  const std::span<const std::byte> frame = storage.Load(raw, (setup.flags & 2) != 0 ? 4 : 0);

  const Result<wire::FrameView> decoded = wire::DecodeFrame(frame);
  const Result<wire::FrameView> decoded_again = wire::DecodeFrame(frame);
  EDGESGD_FUZZ_CHECK(decoded.ok() == decoded_again.ok() &&
                         decoded.status().code() == decoded_again.status().code(),
                     "DecodeFrame's verdict is deterministic");
  if (!decoded.ok()) return;
  const wire::FrameView& view = decoded.value();
  const wire::FrameView& view_again = decoded_again.value();
  EDGESGD_FUZZ_CHECK(view.kind == view_again.kind && view.header == view_again.header,
                     "DecodeFrame's result is deterministic");

  EDGESGD_FUZZ_CHECK(wire::IsFrameAligned(frame), "a decoded frame was aligned");
  const Result<std::size_t> length = wire::ReadFrameLength(frame);
  EDGESGD_FUZZ_CHECK(length.ok() && length.value() == frame.size(),
                     "a decoded frame's length prefix gives its size");
  EDGESGD_FUZZ_CHECK(view.kind != wire::MessageKind::kNone, "a decoded frame has a message");

  switch (view.kind) {
    case wire::MessageKind::kError:
      EDGESGD_FUZZ_CHECK(view.error.reason.size() <= wire::kMaxErrorReasonBytes,
                         "an Error's reason is within kMaxErrorReasonBytes");
      EDGESGD_FUZZ_CHECK(Inside(frame, view.error.reason.data(), view.error.reason.size()),
                         "an Error's reason points into the frame");
      CheckReencodes(view);
      return;
    case wire::MessageKind::kWelcome: {
      EDGESGD_FUZZ_CHECK(ValidateCodecParams(view.welcome.codec).ok(),
                         "a decoded Welcome's codec parameters are valid");
      const TensorLayout& layout = view.welcome.layout;
      EDGESGD_FUZZ_CHECK(layout.tensor_count() >= 1 && layout.tensor_count() <= kMaxTensors,
                         "a decoded Welcome's layout has 1..kMaxTensors tensors");
      CheckReencodes(view);
      return;
    }
    case wire::MessageKind::kModelBroadcast:
    case wire::MessageKind::kUpdate:
    case wire::MessageKind::kGossipExchange:
      break;
    case wire::MessageKind::kSecureAggregation:
      EDGESGD_FUZZ_CHECK(
          SpanInside(frame, view.secure.masked) && SpanInside(frame, view.secure.survivors),
          "secure aggregation words point into the frame");
      CheckReencodes(view);
      return;
    default:
      CheckReencodes(view);
      return;
  }

  const wire::EncodedPayload& payload = view.payload;
  EDGESGD_FUZZ_CHECK(view.message.kind == view.kind, "a payload message names its own kind");
  EDGESGD_FUZZ_CHECK(view.message.broadcast.content == wire::BroadcastContent::kModel ||
                         view.message.broadcast.content == wire::BroadcastContent::kAggregate,
                     "a ModelBroadcast's content is within the schema");
  EDGESGD_FUZZ_CHECK(static_cast<std::size_t>(view.message.gossip.vector) <
                         wire::kGossipVectorCount,
                     "a GossipExchange's vector is within the schema");
  EDGESGD_FUZZ_CHECK(static_cast<unsigned>(payload.layout) >= 1 &&
                         static_cast<unsigned>(payload.layout) <= kPayloadLayoutCount,
                     "a payload's table is a known layout");
  EDGESGD_FUZZ_CHECK(SameView(payload.view, view_again.payload.view) &&
                         payload.codec == view_again.payload.codec &&
                         payload.layout == view_again.payload.layout &&
                         payload.header == view_again.payload.header,
                     "the decoded payload is deterministic");
  EDGESGD_FUZZ_CHECK(
      SpanInside(frame, payload.view.indices) && SpanInside(frame, payload.view.values) &&
          SpanInside(frame, payload.view.words) && SpanInside(frame, payload.view.scales),
      "payload spans point into the frame");

  // The receiver's configuration: the header's layout and codec parameters (or, when those do
  // not validate, the defaults of the codec the payload names).
  std::array<std::uint64_t, 4> sizes{};
  for (std::size_t t = 0; t < setup.tensors; ++t) sizes[t] = setup.sizes[t];
  const Result<TensorLayout> layout =
      TensorLayout::FromSizes(std::span<const std::uint64_t>(sizes.data(), setup.tensors));
  if (!layout.ok()) return;
  Result<CodecParams> configured = ParamsFromWords(
      setup.codec, std::span<const std::uint32_t>(setup.words.data(), setup.word_count));
  if (!configured.ok()) configured = DefaultCodecParams(payload.codec);
  if (!configured.ok()) return;

  const float weight = DecoderWeight(setup.weight);
  const Result<CodecParams> params =
      ParamsForPayload(configured.value(), payload.codec, payload.layout, payload.header);
  if (params.ok()) {
    EDGESGD_FUZZ_CHECK(ValidateCodecParams(params.value()).ok(),
                       "ParamsForPayload returns valid parameters");
    CheckDecodeAdd(params.value(), layout.value(), setup.context, payload.view, weight);
  } else if ((setup.flags & 1) != 0) {
    // A receiver never does this, but DecodeAdd promises to check every field size itself.
    CheckDecodeAdd(configured.value(), layout.value(), setup.context, payload.view, weight);
  }
}

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::Run(data, size);
  return 0;
}
