// DecodeFrame against malformed input: truncated, bit-flipped, oversized, wrong identifier,
// wrong version, misaligned, inconsistent unions, out-of-range fields, and a fuzz loop of random
// and mutated frames. Every failure must be a Status; nothing may crash (run under ASan+UBSan).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/edgesgd_generated.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/internal/fixed_allocator.h"
#include "edgesgd/wire/receive_buffer.h"

namespace edgesgd::wire {
namespace {

using Bytes = std::vector<std::byte>;

// Bytes copied to 8-byte aligned storage, as a receiver holds them.
class AlignedFrame {
 public:
  explicit AlignedFrame(std::span<const std::byte> bytes, std::size_t offset = 0)
      : words_((bytes.size() + offset) / 8 + 2), size_(bytes.size()), offset_(offset) {
    if (!bytes.empty()) std::memcpy(data(), bytes.data(), bytes.size());
  }
  std::byte* data() { return reinterpret_cast<std::byte*>(words_.data()) + offset_; }
  std::span<const std::byte> span() { return std::span<const std::byte>(data(), size_); }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t size_;
  std::size_t offset_;
};

Result<FrameView> Decode(std::span<const std::byte> bytes) {
  AlignedFrame frame(bytes);
  return DecodeFrame(frame.span());
}

void WriteU32(Bytes& bytes, std::size_t at, std::uint32_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof(value));
}

// A valid frame and what it was built from (for decoding its payload afterwards).
struct Sample {
  Bytes bytes;
  CodecParams params;
  TensorLayout layout;
};

std::vector<Sample> SampleFrames() {
  std::vector<Sample> samples;
  std::vector<std::uint64_t> storage(8192);
  FrameBuilder builder(std::as_writable_bytes(std::span<std::uint64_t>(storage)));
  const std::uint64_t sizes[] = {50, 13};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::vector<float> input(layout.dimension());
  for (std::size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(i % 7) - 3.0f + 0.125f * static_cast<float>(i);
  }
  std::vector<std::uint64_t> scratch(4096);
  const FrameHeader header{.sender = 2, .round = 11, .sequence = 99};
  auto add = [&](const Result<std::span<const std::byte>>& frame, const CodecParams& params) {
    EXPECT_TRUE(frame.ok());
    if (frame.ok()) samples.push_back({Bytes(frame->begin(), frame->end()), params, layout});
  };
  const PayloadMessage messages[] = {
      PayloadMessage::Update({.worker = 2, .samples = 8}),
      PayloadMessage::ModelBroadcast({.content = BroadcastContent::kModel, .participants = 3}),
      PayloadMessage::GossipExchange({.phase = 1, .step = 2, .vector = GossipVector::kModel})};
  const std::vector<CodecParams> codecs = test_util::EveryCodec(
      {.k_ratio = 0.2f, .block_ratio = 4, .qsgd_levels = 7, .qsgd_bucket = 16});
  for (std::size_t k = 0; k < codecs.size(); ++k) {
    add(builder.EncodePayloadFrame(header, messages[k % 3], AllCodecs(), codecs[k], layout,
                                   {.seed = 5, .round = 11, .worker = 2}, input,
                                   std::as_writable_bytes(std::span<std::uint64_t>(scratch))),
        codecs[k]);
  }
  WelcomeInfo welcome;
  welcome.assigned_id = 4;
  welcome.layout = layout;
  welcome.codec = TopKParams{};
  welcome.training.learning_rate = 0.1f;
  add(builder.EncodeWelcome(header, welcome), {});
  add(builder.EncodeJoin(header, {Architecture::kAarch64, AllCodecs().Mask(), 4096, 65536}), {});
  add(builder.EncodeHeartbeat(header, {77, 66}), {});
  add(builder.EncodeLeave(header, {LeaveReason::kFailure}), {});
  add(builder.EncodeError(header, {StatusCode::kDataLoss, "bad frame from 3"}), {});
  // A secure aggregation message of every phase, each with its list.
  std::array<SecureRosterRecord, 3> roster{};
  std::array<SecureSealedRecord, 3> shares{};
  std::array<SecureShareRecord, 4> revealed{};
  std::array<SecureSignatureRecord, 3> signatures{};
  for (std::uint32_t i = 0; i < 3; ++i) {
    roster[i].device = shares[i].device = revealed[i].owner = signatures[i].device = i + 1;
    roster[i].share_point = i + 2;
    roster[i].keys_signature[i] = signatures[i].signature[i + 1] = std::byte{0x5A};
    revealed[i].kind = static_cast<std::uint8_t>(i % 2);
  }
  const std::uint32_t words[] = {0xDEADBEEFu, 7, 9};
  SecureMessage secure{.fields = {},
                       .roster = roster,
                       .shares = shares,
                       .masked = words,
                       .survivors = std::span(words).first(2),
                       .revealed = revealed,
                       .signatures = signatures};
  secure.fields.signature[3] = std::byte{0x11};
  for (std::uint8_t p = 0; p <= static_cast<std::uint8_t>(SecurePhase::kSignatures); ++p) {
    secure.fields.phase = static_cast<SecurePhase>(p);
    add(builder.EncodeSecure(header, secure), {});
  }
  return samples;
}

// Checks what a successful decode promises: a known kind and views inside the frame.
void ExpectViewInside(const FrameView& view, std::span<const std::byte> frame) {
  ASSERT_NE(view.kind, MessageKind::kNone);
  ASSERT_LE(static_cast<int>(view.kind), static_cast<int>(MessageKind::kSecureAggregation));
  const auto inside = [&](const void* data, std::size_t bytes) {
    if (bytes == 0) return true;
    const auto* p = static_cast<const std::byte*>(data);
    return p >= frame.data() && p + bytes <= frame.data() + frame.size() &&
           reinterpret_cast<std::uintptr_t>(p) % 4 == 0;
  };
  const PayloadView& v = view.payload.view;
  EXPECT_TRUE(inside(v.indices.data(), v.indices.size_bytes()));
  EXPECT_TRUE(inside(v.values.data(), v.values.size_bytes()));
  EXPECT_TRUE(inside(v.words.data(), v.words.size_bytes()));
  EXPECT_TRUE(inside(v.scales.data(), v.scales.size_bytes()));
  if (!view.error.reason.empty()) {
    const auto* p = reinterpret_cast<const std::byte*>(view.error.reason.data());
    EXPECT_TRUE(p >= frame.data() && p + view.error.reason.size() <= frame.data() + frame.size());
  }
  const SecureView& secure = view.secure;
  EXPECT_TRUE(inside(secure.masked.data(), secure.masked.size_bytes()));
  EXPECT_TRUE(inside(secure.survivors.data(), secure.survivors.size_bytes()));
  // Records are read by copy: reading each one is what must stay inside (ASan watches).
  for (std::size_t i = 0; i < secure.roster.size(); ++i) (void)secure.roster[i];
  for (std::size_t i = 0; i < secure.shares.size(); ++i) (void)secure.shares[i];
  for (std::size_t i = 0; i < secure.revealed.size(); ++i) {
    EXPECT_LE(secure.revealed[i].kind, kSecureMaskKeyShare);
  }
}

// Crafts frames with the generated API, for content FrameBuilder refuses to produce.
class RawFrame {
 public:
  RawFrame()
      : allocator_(reinterpret_cast<std::uint8_t*>(storage_.data()), sizeof(storage_)),
        fbb_(sizeof(storage_), &allocator_, false, 8) {}
  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }
  Bytes Finish(fb::Message type, flatbuffers::Offset<void> message,
               std::uint16_t version = kSchemaVersion) {
    const auto envelope = fb::CreateEnvelope(fbb_, version, 1, 2, 3, type, message);
    fbb_.TrackMinAlign(8);
    fb::FinishSizePrefixedEnvelopeBuffer(fbb_, envelope);
    const auto* p = reinterpret_cast<const std::byte*>(fbb_.GetBufferPointer());
    return Bytes(p, p + fbb_.GetSize());
  }

 private:
  alignas(8) std::array<std::uint64_t, 1024> storage_{};
  internal::FixedAllocator allocator_;
  flatbuffers::FlatBufferBuilder fbb_;
};

TEST(WireReject, ValidSamplesDecode) {
  for (const Sample& sample : SampleFrames()) {
    AlignedFrame frame(sample.bytes);
    const auto view = DecodeFrame(frame.span());
    ASSERT_TRUE(view.ok()) << view.status().str();
    ExpectViewInside(*view, frame.span());
  }
}

TEST(WireReject, Truncated) {
  for (const Sample& sample : SampleFrames()) {
    for (std::size_t n = 0; n < sample.bytes.size(); ++n) {
      Bytes cut(sample.bytes.begin(), sample.bytes.begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_EQ(Decode(cut).status(), Status::DataLoss()) << "length " << n;
      // Even with a length prefix that matches the cut, the content is incomplete — unless
      // the cut removed only the zero padding after a string's terminator, which changes
      // nothing the frame says.
      if (n >= kFramePrefixBytes) {
        WriteU32(cut, 0, static_cast<std::uint32_t>(n - kFramePrefixBytes));
        bool only_padding_removed = true;
        for (std::size_t i = n; i < sample.bytes.size(); ++i) {
          only_padding_removed &= sample.bytes[i] == std::byte{0};
        }
        if (!only_padding_removed) {
          EXPECT_FALSE(Decode(cut).ok()) << "length " << n << " with fixed prefix";
        }
      }
    }
  }
}

TEST(WireReject, TrailingBytes) {
  Bytes longer = SampleFrames().front().bytes;
  longer.resize(longer.size() + 8);
  EXPECT_EQ(Decode(longer).status(), Status::DataLoss());
}

TEST(WireReject, BitFlips) {
  std::size_t accepted = 0;
  std::size_t total = 0;
  for (const Sample& sample : SampleFrames()) {
    for (std::size_t bit = 0; bit < 8 * sample.bytes.size(); ++bit) {
      Bytes flipped = sample.bytes;
      flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      AlignedFrame frame(flipped);
      const auto view = DecodeFrame(frame.span());
      ++total;
      // Length prefix, root offset and identifier: no flip there yields a valid frame.
      if (bit / 8 < kFramePrefixBytes + 8) {
        EXPECT_FALSE(view.ok()) << "bit " << bit;
      }
      if (view.ok()) {
        ++accepted;  // a flipped payload value or header field is still a well-formed frame
        ExpectViewInside(*view, frame.span());
      }
    }
  }
  std::printf("[wire] bit flips: %zu of %zu frames still well-formed (payload/header bits)\n",
              accepted, total);
}

TEST(WireReject, OversizedLengthPrefix) {
  const Bytes valid = SampleFrames().front().bytes;
  Bytes huge = valid;
  WriteU32(huge, 0, 0xFFFFFFFFu);
  EXPECT_EQ(Decode(huge).status(), Status::OutOfRange());
  WriteU32(huge, 0, static_cast<std::uint32_t>(kMaxFrameBytes));  // one past the ceiling
  EXPECT_EQ(Decode(huge).status(), Status::OutOfRange());

  // The receiver's own limit applies too.
  AlignedFrame frame(valid);
  EXPECT_TRUE(DecodeFrame(frame.span(), valid.size()).ok());
  EXPECT_EQ(DecodeFrame(frame.span(), valid.size() - 1).status(), Status::OutOfRange());

  // The same checks for a stream reader that has only the prefix.
  const std::byte max_prefix[4] = {std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF},
                                   std::byte{0xFF}};
  EXPECT_EQ(ReadFrameLength(max_prefix).status(), Status::OutOfRange());
  const std::byte small_prefix[4] = {std::byte{4}, std::byte{0}, std::byte{0}, std::byte{0}};
  EXPECT_EQ(ReadFrameLength(small_prefix).status(), Status::DataLoss());
  EXPECT_EQ(ReadFrameLength(std::span<const std::byte>(max_prefix, 3)).status(),
            Status::DataLoss());
  const Result<std::size_t> length = ReadFrameLength(valid);
  ASSERT_TRUE(length.ok());
  EXPECT_EQ(*length, valid.size());
  EXPECT_EQ(ReadFrameLength(valid, valid.size() - 8).status(), Status::OutOfRange());
}

TEST(WireReject, WrongIdentifier) {
  Bytes wrong = SampleFrames().front().bytes;
  wrong[11] = std::byte{'X'};
  EXPECT_EQ(Decode(wrong).status(), Status::DataLoss());
}

TEST(WireReject, WrongVersion) {
  for (const std::uint16_t version : {std::uint16_t{0}, std::uint16_t{kSchemaVersion - 1},
                                      std::uint16_t{kSchemaVersion + 1}, std::uint16_t{0xFFFF}}) {
    RawFrame raw;
    const auto heartbeat = fb::CreateHeartbeat(raw.fbb(), 1, 2);
    EXPECT_EQ(Decode(raw.Finish(fb::Message::Heartbeat, heartbeat.Union(), version)).status(),
              Status::FailedPrecondition())
        << version;
  }
  RawFrame current;
  const auto heartbeat = fb::CreateHeartbeat(current.fbb(), 1, 2);
  EXPECT_TRUE(Decode(current.Finish(fb::Message::Heartbeat, heartbeat.Union())).ok());
}

TEST(WireReject, Misaligned) {
  const Bytes valid = SampleFrames().front().bytes;
  for (const std::size_t offset : {1u, 2u, 4u, 7u}) {
    AlignedFrame shifted(valid, offset);
    EXPECT_EQ(DecodeFrame(shifted.span()).status(), Status::InvalidArgument()) << offset;
    // AlignFrame copies it into aligned storage, after which it decodes.
    ReceiveBuffer<4096> aligned;
    const auto realigned = AlignFrame(shifted.span(), aligned.span());
    ASSERT_TRUE(realigned.ok());
    EXPECT_EQ(realigned->data(), aligned.bytes);
    EXPECT_TRUE(DecodeFrame(*realigned).ok());
    EXPECT_EQ(AlignFrame(shifted.span(), aligned.span().subspan(1)).status(),
              Status::InvalidArgument());
    EXPECT_EQ(AlignFrame(shifted.span(), aligned.span().first(16)).status(),
              Status::ResourceExhausted());
  }
  AlignedFrame aligned(valid);
  std::byte unused[8];
  const auto same = AlignFrame(aligned.span(), unused);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->data(), aligned.span().data());  // no copy when already aligned
}

TEST(WireReject, MissingOrUnknownMessage) {
  {
    RawFrame raw;
    EXPECT_EQ(Decode(raw.Finish(fb::Message::NONE, 0)).status(), Status::DataLoss());
  }
  {
    RawFrame raw;  // a union type this version does not know: the verifier lets it pass
    const auto table = fb::CreateHeartbeat(raw.fbb(), 1, 2);
    EXPECT_EQ(Decode(raw.Finish(static_cast<fb::Message>(42), table.Union())).status(),
              Status::DataLoss());
  }
  for (const fb::Message type :
       {fb::Message::Join, fb::Message::Welcome, fb::Message::ModelBroadcast, fb::Message::Update,
        fb::Message::GossipExchange, fb::Message::Heartbeat, fb::Message::Leave, fb::Message::Error,
        fb::Message::SecureAggregation}) {
    RawFrame raw;  // type set, table missing
    EXPECT_EQ(Decode(raw.Finish(type, 0)).status(), Status::DataLoss());
  }
}

TEST(WireReject, MalformedSecureAggregation) {
  const fb::SecureKey key;
  const auto decode = [](RawFrame& raw, flatbuffers::Offset<fb::SecureAggregation> table) {
    return Decode(raw.Finish(fb::Message::SecureAggregation, table.Union())).status();
  };
  {
    RawFrame raw;  // a phase this version does not know
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase(7))),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // a key advertisement without its mask key
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::Keys, &key)),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // shares without the seed commitment
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::Shares)),
              Status::DataLoss());
  }
  const std::uint32_t two[] = {1, 2};
  const std::uint8_t kinds[] = {1, 2};
  std::vector<std::uint32_t> share_words(2 * kSecureShareWords, 5);
  {
    RawFrame raw;  // a revealed share of neither kind
    const auto devices = raw.fbb().CreateVector(two, 2);
    const auto kind_vector = raw.fbb().CreateVector(kinds, 2);
    const auto word_vector = raw.fbb().CreateVector(share_words);
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::Unmasking,
                                                      nullptr, nullptr, 0, 0, devices, 0, 0,
                                                      nullptr, 0, 0, kind_vector, word_vector)),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // revealed shares with one word too few
    const std::uint8_t good_kinds[] = {0, 1};
    const auto devices = raw.fbb().CreateVector(two, 2);
    const auto kind_vector = raw.fbb().CreateVector(good_kinds, 2);
    const auto word_vector = raw.fbb().CreateVector(share_words.data(), share_words.size() - 1);
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::Unmasking,
                                                      nullptr, nullptr, 0, 0, devices, 0, 0,
                                                      nullptr, 0, 0, kind_vector, word_vector)),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // a roster with two devices and one pair of keys
    std::vector<std::uint8_t> keys(2 * kSecureKeyBytes);
    const auto devices = raw.fbb().CreateVector(two, 2);
    const auto points = raw.fbb().CreateVector(two, 2);
    const auto key_vector = raw.fbb().CreateVector(keys);
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::Roster, nullptr,
                                                      nullptr, 3, 1, devices, points, key_vector)),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // sealed shares for one device and two senders
    std::vector<std::uint8_t> sealed(kSecureSealedBytes);
    const auto devices = raw.fbb().CreateVector(two, 2);
    const auto sealed_vector = raw.fbb().CreateVector(sealed);
    EXPECT_EQ(decode(raw, fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::DeliveredShares,
                                                      nullptr, nullptr, 0, 0, devices, 0, 0,
                                                      nullptr, sealed_vector)),
              Status::DataLoss());
  }
  {
    RawFrame raw;  // a list whose length runs past the frame fails verification
    const std::uint32_t words[] = {1, 2, 3};
    const auto masked = raw.fbb().CreateVector(words, 3);
    Bytes bytes =
        raw.Finish(fb::Message::SecureAggregation,
                   fb::CreateSecureAggregation(raw.fbb(), fb::SecurePhase::MaskedInput, nullptr,
                                               nullptr, 0, 0, 0, 0, 0, nullptr, 0, masked)
                       .Union());
    ASSERT_TRUE(Decode(bytes).ok());
    // The vector's length word is the only 3 in the frame followed by the words 1, 2, 3.
    const std::uint32_t pattern[] = {3, 1, 2, 3};
    const auto at =
        std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(pattern),
                    reinterpret_cast<const std::byte*>(pattern) + sizeof(pattern));
    ASSERT_NE(at, bytes.end());
    WriteU32(bytes, static_cast<std::size_t>(at - bytes.begin()), 1u << 20);
    EXPECT_EQ(Decode(bytes).status(), Status::DataLoss());
  }
}

// An Update frame with the given codec and payload parts.
Bytes CraftUpdate(CodecId codec, fb::Payload type, bool with_table, std::uint32_t levels = 7,
                  std::uint32_t bucket = 16) {
  RawFrame raw;
  flatbuffers::FlatBufferBuilder& fbb = raw.fbb();
  const float values[] = {1.0f, 2.0f};
  const std::uint32_t words[] = {3, 4};
  flatbuffers::Offset<void> table = 0;
  if (with_table) {
    switch (type) {
      case fb::Payload::DensePayload:
        table = fb::CreateDensePayload(fbb, fbb.CreateVector(values, 2)).Union();
        break;
      case fb::Payload::SparsePayload:
        table =
            fb::CreateSparsePayload(fbb, fbb.CreateVector(words, 2), fbb.CreateVector(values, 2))
                .Union();
        break;
      case fb::Payload::SignPayload:
        table = fb::CreateSignPayload(fbb, fbb.CreateVector(words, 2), fbb.CreateVector(values, 1))
                    .Union();
        break;
      case fb::Payload::QuantizedPayload:
        table = fb::CreateQuantizedPayload(fbb, fbb.CreateVector(words, 2),
                                           fbb.CreateVector(values, 1), levels, bucket)
                    .Union();
        break;
      default:
        break;
    }
  }
  const auto update = fb::CreateUpdate(fbb, 1, 1, codec, type, table);
  return raw.Finish(fb::Message::Update, update.Union());
}

// Whether a receiver running `configured` takes the payload of a decoded frame.
Status ReceiverCheck(const CodecParams& configured, std::span<const std::byte> frame) {
  const Result<FrameView> view = Decode(frame);
  EDGESGD_TRY(view);
  const EncodedPayload& payload = view.value().payload;
  return ParamsForPayload(configured, payload.codec, payload.layout, payload.header).status();
}

TEST(WireReject, MissingPayloadTable) {
  using fb::Payload;
  EXPECT_TRUE(Decode(CraftUpdate(kCodecId<TopKCodec>, Payload::SparsePayload, true)).ok());
  EXPECT_EQ(Decode(CraftUpdate(kCodecId<IdentityCodec>, Payload::NONE, false)).status(),
            Status::DataLoss());
  // Type present, table missing.
  EXPECT_EQ(Decode(CraftUpdate(kCodecId<SignCodec>, Payload::SignPayload, false)).status(),
            Status::DataLoss());
}

// The decoder reports the codec, table and header a frame names; whether they fit the run is the
// receiver's check (ParamsForPayload), which refuses every inconsistency.
TEST(WireReject, InconsistentPayloadIsRefusedByTheReceiver) {
  using fb::Payload;
  const CodecParams top_k = TopKParams{};
  const CodecParams rand_k = RandKParams{};
  const CodecParams sign = SignParams{};
  const CodecParams qsgd = QsgdParams{.levels = 7, .bucket = 16};
  // The well-formed baselines decode and are accepted.
  EXPECT_TRUE(
      ReceiverCheck(top_k, CraftUpdate(kCodecId<TopKCodec>, Payload::SparsePayload, true)).ok());
  EXPECT_TRUE(
      ReceiverCheck(rand_k, CraftUpdate(kCodecId<RandKCodec>, Payload::DensePayload, true)).ok());
  EXPECT_TRUE(
      ReceiverCheck(qsgd, CraftUpdate(kCodecId<QsgdCodec>, Payload::QuantizedPayload, true)).ok());
  // A payload table other than the one the codec names.
  EXPECT_EQ(ReceiverCheck(top_k, CraftUpdate(kCodecId<TopKCodec>, Payload::DensePayload, true)),
            Status::DataLoss());
  EXPECT_EQ(ReceiverCheck(sign, CraftUpdate(kCodecId<SignCodec>, Payload::QuantizedPayload, true)),
            Status::DataLoss());
  // Another codec than the run's, and a codec no one knows.
  EXPECT_EQ(ReceiverCheck(top_k, CraftUpdate(kCodecId<RegTopKCodec>, Payload::SparsePayload, true)),
            Status::DataLoss());
  EXPECT_EQ(ReceiverCheck(rand_k, CraftUpdate(99, Payload::DensePayload, true)),
            Status::DataLoss());
  // qsgd headers the run cannot produce: outside every codec's domain, or another level count
  // or bucket than the run's.
  const CodecParams dq = QsgdParams{.bucket = 16, .schedule = QuantScheduleKind::kDq};
  for (const CodecParams& configured : {qsgd, dq}) {
    for (const std::uint32_t levels : {0u, kMaxQsgdLevels + 1, 255u}) {
      EXPECT_EQ(ReceiverCheck(configured, CraftUpdate(kCodecId<QsgdCodec>,
                                                      Payload::QuantizedPayload, true, levels)),
                Status::DataLoss())
          << levels;
    }
    EXPECT_EQ(ReceiverCheck(configured, CraftUpdate(kCodecId<QsgdCodec>, Payload::QuantizedPayload,
                                                    true, 7, 0)),
              Status::DataLoss());
  }
  EXPECT_EQ(
      ReceiverCheck(qsgd, CraftUpdate(kCodecId<QsgdCodec>, Payload::QuantizedPayload, true, 3)),
      Status::DataLoss());
  EXPECT_TRUE(
      ReceiverCheck(dq, CraftUpdate(kCodecId<QsgdCodec>, Payload::QuantizedPayload, true, 3)).ok());
}

TEST(WireReject, PayloadFieldSizesAreCheckedByTheCodec) {
  // DecodeFrame does not know the layout; DecodeAdd rejects a payload of the wrong shape.
  const auto view = Decode(CraftUpdate(kCodecId<TopKCodec>, fb::Payload::SparsePayload, true));
  ASSERT_TRUE(view.ok());
  const CodecParams params = TopKParams{.k_ratio = 0.5f};
  const EncodedPayload& payload = view->payload;
  const Result<CodecParams> decode_params =
      ParamsForPayload(params, payload.codec, payload.layout, payload.header);
  ASSERT_TRUE(decode_params.ok());
  const TensorLayout layout = TensorLayout::Single(100).value();  // expects 50 indices
  std::vector<float> accumulator(100, 0.0f);
  std::vector<std::uint64_t> scratch(CodecScratchBytes(params, layout) / 8 + 1);
  EXPECT_EQ(
      AllCodecs().DecodeAdd(decode_params.value(), layout, {}, payload.view, 1.0f, accumulator,
                            std::as_writable_bytes(std::span<std::uint64_t>(scratch))),
      Status::DataLoss());
}

// A Welcome frame with a tweak applied to otherwise valid content.
struct WelcomeFields {
  std::vector<std::uint32_t> sizes = {10, 20};
  std::uint32_t dimension = 30;
  bool with_codec = true;
  CodecId codec = kCodecId<TopKCodec>;
  std::vector<std::uint32_t> parameters = {std::bit_cast<std::uint32_t>(0.5f)};  // k_ratio
};

Bytes CraftWelcome(const WelcomeFields& f) {
  RawFrame raw;
  flatbuffers::FlatBufferBuilder& fbb = raw.fbb();
  const auto sizes = fbb.CreateVector(f.sizes.data(), f.sizes.size());
  const auto codec =
      f.with_codec ? fb::CreateCodecConfig(
                         fbb, f.codec, fbb.CreateVector(f.parameters.data(), f.parameters.size()))
                   : 0;
  const auto welcome = fb::CreateWelcome(fbb, 1, 2, 3, 4, f.dimension, sizes, codec, 0);
  return raw.Finish(fb::Message::Welcome, welcome.Union());
}

// The decoder refuses it with kDataLoss and the reason, which contains `because`.
void ExpectRefusedWelcome(const WelcomeFields& f, std::string_view because) {
  const Status status = Decode(CraftWelcome(f)).status();
  EXPECT_EQ(status, Status::DataLoss());
  EXPECT_NE(std::string_view(status.reason()).find(because), std::string_view::npos)
      << status.reason();
}

TEST(WireReject, InvalidWelcome) {
  const auto view = Decode(CraftWelcome({}));
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->welcome.codec, CodecParams(TopKParams{.k_ratio = 0.5f}));
  WelcomeFields f;
  f.dimension = 31;
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  f = {};
  f.sizes.assign(kMaxTensors + 1, 1);
  f.dimension = static_cast<std::uint32_t>(kMaxTensors + 1);
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  f = {};
  f.sizes = {10, 0, 20};
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  f = {};
  f.sizes = {};
  f.dimension = 0;
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  f = {};
  f.sizes = {0xFFFFFFFFu, 1};  // total above 2^32 - 1
  f.dimension = 0;
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  f = {};
  f.with_codec = false;
  EXPECT_EQ(Decode(CraftWelcome(f)).status(), Status::DataLoss());
  // Codec words ParamsFromWords refuses, with its reason.
  f = {};
  f.parameters = {std::bit_cast<std::uint32_t>(2.0f)};
  ExpectRefusedWelcome(f, "k ratio");
  f = {};
  f.parameters.push_back(0);
  ExpectRefusedWelcome(f, "parameter count");
  f = {};
  f.codec = static_cast<CodecId>(kCodecCount);
  ExpectRefusedWelcome(f, "no codec of this build has this id");
  f = {};
  f.codec = kCodecId<RegTopKCodec>;
  f.parameters = {std::bit_cast<std::uint32_t>(0.5f), std::bit_cast<std::uint32_t>(4.0f),
                  std::bit_cast<std::uint32_t>(1e8f)};  // k_ratio, mu, Q
  EXPECT_TRUE(Decode(CraftWelcome(f)).ok());
  f.parameters[1] = std::bit_cast<std::uint32_t>(0.0f);
  ExpectRefusedWelcome(f, "mu");
  f = {};
  f.codec = kCodecId<SignCodec>;
  f.parameters = {2};  // a sign scale outside the schema
  ExpectRefusedWelcome(f, "sign scale");
  f.parameters = {1, std::bit_cast<std::uint32_t>(0.5f)};  // the plain sign has no noise bound
  ExpectRefusedWelcome(f, "parameter count");
  f.codec = kCodecId<StochasticSignCodec>;
  f.parameters = {1, std::bit_cast<std::uint32_t>(-0.5f)};
  ExpectRefusedWelcome(f, "noise bound");
  // A codec without parameters needs no vector.
  f = {};
  f.codec = kCodecId<IdentityCodec>;
  f.parameters = {};
  EXPECT_TRUE(Decode(CraftWelcome(f)).ok());
}

TEST(WireReject, OutOfRangeEnumsAndStrings) {
  {
    RawFrame raw;
    const auto join = fb::CreateJoin(raw.fbb(), static_cast<fb::Architecture>(99), 1, 2, 3);
    EXPECT_EQ(Decode(raw.Finish(fb::Message::Join, join.Union())).status(), Status::DataLoss());
  }
  {
    RawFrame raw;
    const auto leave = fb::CreateLeave(raw.fbb(), static_cast<fb::LeaveReason>(50));
    EXPECT_EQ(Decode(raw.Finish(fb::Message::Leave, leave.Union())).status(), Status::DataLoss());
  }
  {
    RawFrame raw;
    const auto error = fb::CreateError(raw.fbb(), 200, 0);
    EXPECT_EQ(Decode(raw.Finish(fb::Message::Error, error.Union())).status(), Status::DataLoss());
  }
  {
    RawFrame raw;
    const std::string reason(kMaxErrorReasonBytes + 1, 'r');
    const auto text = raw.fbb().CreateString(reason.data(), reason.size());
    const auto error = fb::CreateError(raw.fbb(), 3, text);
    EXPECT_EQ(Decode(raw.Finish(fb::Message::Error, error.Union())).status(), Status::DataLoss());
  }
  {
    RawFrame raw;
    const auto values = raw.fbb().CreateVector(std::vector<float>{1.0f});
    const auto payload = fb::CreateDensePayload(raw.fbb(), values);
    const auto gossip = fb::CreateGossipExchange(raw.fbb(), 1, 1, static_cast<fb::GossipVector>(9),
                                                 kCodecId<IdentityCodec>, fb::Payload::DensePayload,
                                                 payload.Union());
    EXPECT_EQ(Decode(raw.Finish(fb::Message::GossipExchange, gossip.Union())).status(),
              Status::DataLoss());
  }
  {
    RawFrame raw;
    const auto values = raw.fbb().CreateVector(std::vector<float>{1.0f});
    const auto payload = fb::CreateDensePayload(raw.fbb(), values);
    const auto broadcast = fb::CreateModelBroadcast(raw.fbb(), static_cast<fb::BroadcastContent>(5),
                                                    1, kCodecId<IdentityCodec>,
                                                    fb::Payload::DensePayload, payload.Union());
    EXPECT_EQ(Decode(raw.Finish(fb::Message::ModelBroadcast, broadcast.Union())).status(),
              Status::DataLoss());
  }
}

// ~10,000 random and mutated frames: DecodeFrame must return a Status for each (never crash,
// never read out of bounds under ASan), and whatever it accepts must hold to its promises —
// including through the codec's DecodeAdd.
TEST(WireFuzz, RandomAndMutatedFramesNeverCrash) {
  const std::vector<Sample> samples = SampleFrames();
  std::mt19937 rng(20240611u);
  auto uniform = [&rng](std::size_t n) {
    return static_cast<std::size_t>(rng() % static_cast<std::uint32_t>(n));
  };
  const std::uint32_t interesting[] = {
      0u, 1u, 2u, 4u, 8u, 0x7FFFu, 0xFFFFu, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0xFFFFFFFCu};
  std::map<std::string, std::size_t> outcomes;
  std::vector<float> accumulator;
  std::vector<std::uint64_t> scratch(8192);
  constexpr int kIterations = 10000;

  for (int iteration = 0; iteration < kIterations; ++iteration) {
    Bytes bytes;
    const Sample* origin = nullptr;
    if (uniform(10) < 3) {
      // Random bytes; half of them with a consistent length prefix and the right identifier, so
      // the verifier (not the cheap checks) has to reject them.
      bytes.resize(uniform(300));
      for (std::byte& b : bytes) b = static_cast<std::byte>(rng());
      if (bytes.size() >= kMinFrameBytes && uniform(2) == 0) {
        WriteU32(bytes, 0, static_cast<std::uint32_t>(bytes.size() - kFramePrefixBytes));
        std::memcpy(bytes.data() + 8, kFileIdentifier.data(), 4);
      }
    } else {
      origin = &samples[uniform(samples.size())];
      bytes = origin->bytes;
      const std::size_t mutations = 1 + uniform(8);
      for (std::size_t m = 0; m < mutations; ++m) {
        const std::size_t at = uniform(bytes.size());
        switch (uniform(4)) {
          case 0:
            bytes[at] = static_cast<std::byte>(rng());
            break;
          case 1:
            bytes[at] ^= static_cast<std::byte>(1u << uniform(8));
            break;
          case 2:
            bytes[at] = uniform(2) == 0 ? std::byte{0} : std::byte{0xFF};
            break;
          default: {  // an interesting u32 at a 4-aligned position (offsets, lengths, types)
            const std::size_t word = at & ~std::size_t{3};
            if (word + 4 <= bytes.size()) WriteU32(bytes, word, interesting[uniform(11)]);
            break;
          }
        }
      }
      if (uniform(5) == 0) {  // truncate or extend, keeping the prefix consistent
        bytes.resize(uniform(2) == 0 ? uniform(bytes.size() + 1) : bytes.size() + uniform(64));
        if (bytes.size() >= kFramePrefixBytes && uniform(4) != 0) {
          WriteU32(bytes, 0, static_cast<std::uint32_t>(bytes.size() - kFramePrefixBytes));
        }
      }
    }

    AlignedFrame frame(bytes);
    const Result<FrameView> view = DecodeFrame(frame.span());
    ++outcomes[view.ok() ? std::string("accepted") : std::string(view.status().str())];
    // The decoder verifies the envelope with its own union verifier: it must agree with the
    // generated one (with the decoder's limits).
    flatbuffers::Verifier::Options options;
    options.max_depth = 4;
    options.max_tables = 8;
    options.check_alignment = true;
    options.check_nested_flatbuffers = false;
    flatbuffers::Verifier verifier(reinterpret_cast<const std::uint8_t*>(frame.data()),
                                   bytes.size(), options);
    if (!fb::VerifySizePrefixedEnvelopeBuffer(verifier)) {
      EXPECT_FALSE(view.ok());
    } else {
      EXPECT_STRNE(view.status().reason(), "the frame fails FlatBuffers verification");
    }
    if (!view.ok()) continue;
    ExpectViewInside(*view, frame.span());
    const bool has_payload = view->kind == MessageKind::kUpdate ||
                             view->kind == MessageKind::kModelBroadcast ||
                             view->kind == MessageKind::kGossipExchange;
    if (has_payload && origin != nullptr) {
      // Receiving an accepted payload must be safe too: the receiver's check, then the codec's
      // DecodeAdd, each ok or a Status.
      const EncodedPayload& payload = view->payload;
      const Result<CodecParams> params =
          ParamsForPayload(origin->params, payload.codec, payload.layout, payload.header);
      if (!params.ok()) {
        ++outcomes[std::string("receiver ") + params.status().str()];
        continue;
      }
      accumulator.assign(origin->layout.dimension(), 0.0f);
      const Status status = AllCodecs().DecodeAdd(
          params.value(), origin->layout, {.seed = 5, .round = 11, .worker = 2}, payload.view, 1.0f,
          accumulator, std::as_writable_bytes(std::span<std::uint64_t>(scratch)));
      ++outcomes[std::string("decode_add ") + status.str()];
    }
  }
  std::printf("[wire] fuzz: %d frames:", kIterations);
  for (const auto& [outcome, count] : outcomes) std::printf(" %s=%zu", outcome.c_str(), count);
  std::printf("\n");
  EXPECT_GT(outcomes["DATA_LOSS"], 0u);
}

}  // namespace
}  // namespace edgesgd::wire
