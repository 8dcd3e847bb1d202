// Round trips of every message through FrameBuilder and DecodeFrame, payloads written by the
// real codecs; frame sizes against the codecs' theoretical payload sizes; golden bytes.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/receive_buffer.h"
#include "edgesgd/wire/wire_format.h"
#include "golden/frame_golden.h"

namespace edgesgd::wire {
namespace {

// 8-byte aligned heap storage for tests (the library itself never allocates).
class AlignedStorage {
 public:
  explicit AlignedStorage(std::size_t bytes) : words_((bytes + 7) / 8 + 1) {}
  std::span<std::byte> bytes() { return std::as_writable_bytes(std::span<std::uint64_t>(words_)); }

 private:
  std::vector<std::uint64_t> words_;
};

std::string Hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const std::byte b : bytes) {
    out += kDigits[static_cast<unsigned>(b) >> 4];
    out += kDigits[static_cast<unsigned>(b) & 0xFu];
  }
  return out;
}

std::vector<float> RandomInput(std::size_t dimension, std::uint32_t seed) {
  std::vector<float> input(dimension);
  std::uint32_t state = seed * 2654435761u + 1;
  for (float& x : input) {
    state = state * 1664525u + 1013904223u;  // LCG: reproducible on every architecture
    x = static_cast<float>(static_cast<std::int32_t>(state >> 8) - (1 << 23)) / 1048576.0f;
  }
  return input;
}

// One configuration of every codec.
std::vector<CodecParams> TestCodecs() {
  return test_util::EveryCodec(
      {.k_ratio = 0.1f, .block_ratio = 8, .qsgd_levels = 15, .qsgd_bucket = 64});
}

TensorLayout MultiTensorLayout() {
  const std::uint64_t sizes[] = {100, 37, 300, 1};
  return TensorLayout::FromSizes(sizes).value();
}

std::vector<PayloadMessage> AllPayloadMessages() {
  return {
      PayloadMessage::Update({.worker = 5, .samples = 32}),
      PayloadMessage::ModelBroadcast({.content = BroadcastContent::kAggregate, .participants = 9}),
      PayloadMessage::GossipExchange({.phase = 2, .step = 3, .vector = GossipVector::kTracker})};
}

// The payload the codec writes into plain vectors, for comparison with the frame's.
struct ReferencePayload {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::vector<std::uint32_t> words;
  std::vector<float> scales;
  PayloadView view() const { return PayloadView(indices, values, words, scales); }
};

ReferencePayload EncodeReference(const CodecParams& params, const TensorLayout& layout,
                                 const CodecContext& context, std::span<const float> input) {
  const PayloadShape shape = EncodedShape(params, layout).value();
  ReferencePayload ref;
  ref.indices.resize(shape.indices);
  ref.values.resize(shape.values);
  ref.words.resize(shape.words);
  ref.scales.resize(shape.scales);
  AlignedStorage scratch(CodecScratchBytes(params, layout));
  const PayloadSpans spans{ref.indices, ref.values, ref.words, ref.scales};
  EXPECT_TRUE(AllCodecs()
                  .Encode(params, layout, context, input, spans,
                          scratch.bytes().first(CodecScratchBytes(params, layout)))
                  .ok());
  return ref;
}

template <typename T>
void ExpectSameElements(std::span<const T> actual, const std::vector<T>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    // Bitwise: the frame carries exactly what the codec wrote.
    EXPECT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(T)), 0) << "element " << i;
  }
}

TEST(WireRoundTrip, EveryCodecInEveryPayloadMessage) {
  const TensorLayout layout = MultiTensorLayout();
  const std::vector<float> input = RandomInput(layout.dimension(), 1);
  const CodecContext context{.seed = 77, .round = 4, .worker = 5};
  const FrameHeader header{.sender = 5, .round = 4, .sequence = 1234567890123ull};

  for (const CodecParams& params : TestCodecs()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    const ReferencePayload ref = EncodeReference(params, layout, context, input);
    const std::size_t scratch_bytes = CodecScratchBytes(params, layout);
    AlignedStorage scratch(scratch_bytes);
    AlignedStorage buffer(FrameBuilderBytes(params, layout));
    FrameBuilder builder(buffer.bytes());

    for (const PayloadMessage& message : AllPayloadMessages()) {
      const Result<std::span<const std::byte>> frame =
          builder.EncodePayloadFrame(header, message, AllCodecs(), params, layout, context, input,
                                     scratch.bytes().first(scratch_bytes));
      ASSERT_TRUE(frame.ok()) << frame.status().str();
      EXPECT_LE(frame->size(), MaxFrameBytes(params, layout));
      EXPECT_EQ(frame->size() % kFrameAlignment, 0u);

      const Result<FrameView> decoded = DecodeFrame(*frame);
      ASSERT_TRUE(decoded.ok()) << decoded.status().str();
      EXPECT_EQ(decoded->header, header);
      EXPECT_EQ(decoded->kind, message.kind);
      EXPECT_EQ(decoded->message, message);
      const EncodedPayload& payload = decoded->payload;
      EXPECT_EQ(payload.codec, CodecIdOf(params));
      EXPECT_EQ(payload.layout, PayloadLayoutOf(params));
      EXPECT_EQ(payload.header, QuantizedHeaderOf(params));
      ExpectSameElements(payload.view.indices, ref.indices);
      ExpectSameElements(payload.view.values, ref.values);
      ExpectSameElements(payload.view.words, ref.words);
      ExpectSameElements(payload.view.scales, ref.scales);

      // Zero copy: the views point into the frame.
      const std::byte* begin = frame->data();
      const std::byte* end = begin + frame->size();
      for (const void* p : {static_cast<const void*>(payload.view.values.data()),
                            static_cast<const void*>(payload.view.words.data())}) {
        if (p == nullptr) continue;
        EXPECT_GE(static_cast<const std::byte*>(p), begin);
        EXPECT_LT(static_cast<const std::byte*>(p), end);
      }

      // A receiver running `params` accepts the frame and decodes it with what the frame names;
      // that equals decoding the codec's own output.
      const Result<CodecParams> decode_params =
          ParamsForPayload(params, payload.codec, payload.layout, payload.header);
      ASSERT_TRUE(decode_params.ok()) << decode_params.status().reason();
      EXPECT_EQ(decode_params.value(), params);
      std::vector<float> from_frame(layout.dimension(), 0.5f);
      std::vector<float> from_reference(layout.dimension(), 0.5f);
      ASSERT_TRUE(AllCodecs()
                      .DecodeAdd(decode_params.value(), layout, context, payload.view, 2.0f,
                                 from_frame, scratch.bytes().first(scratch_bytes))
                      .ok());
      ASSERT_TRUE(AllCodecs()
                      .DecodeAdd(params, layout, context, ref.view(), 2.0f, from_reference,
                                 scratch.bytes().first(scratch_bytes))
                      .ok());
      EXPECT_EQ(from_frame, from_reference);
    }
  }
}

// SCAFFOLD's second payload: an Update carries the change of its control variate in its own
// codec, every codec, and a model broadcast the dense control variate; frames without one say so.
TEST(WireRoundTrip, AControlPayloadTravelsBesideTheFirst) {
  const TensorLayout layout = MultiTensorLayout();
  const std::vector<float> input = RandomInput(layout.dimension(), 2);
  const std::vector<float> change = RandomInput(layout.dimension(), 3);
  const CodecContext context{.seed = 7, .round = 2, .worker = 4};
  for (const CodecParams& params : TestCodecs()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    const PayloadShape shape = EncodedShape(params, layout).value();
    const std::size_t scratch_bytes = CodecScratchBytes(params, layout);
    AlignedStorage scratch(scratch_bytes);
    const std::size_t bound = PayloadFrameBytes(shape) + ControlPayloadBytes(shape);
    AlignedStorage buffer(bound + kBuilderScratchBytes);
    FrameBuilder builder(buffer.bytes());
    const Result<PayloadSpans> spans =
        builder.BeginPayloadFrame({}, PayloadMessage::Update({.worker = 4}), params, layout);
    ASSERT_TRUE(spans.ok());
    ASSERT_TRUE(
        AllCodecs()
            .Encode(params, layout, context, input, *spans, scratch.bytes().first(scratch_bytes))
            .ok());
    const Result<PayloadSpans> control = builder.ReserveControlPayload(params, layout);
    ASSERT_TRUE(control.ok()) << control.status().reason();
    ASSERT_TRUE(
        AllCodecs()
            .Encode(params, layout, context, change, *control, scratch.bytes().first(scratch_bytes))
            .ok());
    const Result<std::span<const std::byte>> frame = builder.FinishPayloadFrame();
    ASSERT_TRUE(frame.ok());
    EXPECT_LE(frame->size(), bound);
    const Result<FrameView> decoded = DecodeFrame(*frame);
    ASSERT_TRUE(decoded.ok()) << decoded.status().str();
    ASSERT_TRUE(decoded->has_control);
    for (const auto& [received, sent] :
         {std::pair{decoded->payload, &input}, std::pair{decoded->control, &change}}) {
      EXPECT_EQ(received.codec, CodecIdOf(params));
      EXPECT_EQ(received.layout, PayloadLayoutOf(params));
      const ReferencePayload ref = EncodeReference(params, layout, context, *sent);
      ExpectSameElements(received.view.indices, ref.indices);
      ExpectSameElements(received.view.values, ref.values);
      ExpectSameElements(received.view.words, ref.words);
      ExpectSameElements(received.view.scales, ref.scales);
    }
  }

  const CodecParams dense;  // identity
  const PayloadShape shape = EncodedShape(dense, layout).value();
  AlignedStorage buffer(PayloadFrameBytes(shape) + ControlPayloadBytes(shape) +
                        kBuilderScratchBytes);
  FrameBuilder builder(buffer.bytes());
  const Result<PayloadSpans> model =
      builder.BeginPayloadFrame({}, PayloadMessage::ModelBroadcast({}), dense, layout);
  ASSERT_TRUE(model.ok());
  std::copy(input.begin(), input.end(), model->values.begin());
  const Result<PayloadSpans> control = builder.ReserveControlPayload(dense, layout);
  ASSERT_TRUE(control.ok());
  std::copy(change.begin(), change.end(), control->values.begin());
  const Result<std::span<const std::byte>> frame = builder.FinishPayloadFrame();
  ASSERT_TRUE(frame.ok());
  const Result<FrameView> decoded = DecodeFrame(*frame);
  ASSERT_TRUE(decoded.ok());
  ASSERT_TRUE(decoded->has_control);
  EXPECT_EQ(decoded->control.codec, CodecIdOf(dense));
  EXPECT_EQ(decoded->control.layout, PayloadLayout::kDense);
  ExpectSameElements(decoded->control.view.values, change);
  ExpectSameElements(decoded->payload.view.values, input);

  // Without a control nothing says there is one.
  for (const PayloadMessage& message : AllPayloadMessages()) {
    ASSERT_TRUE(builder.BeginPayloadFrame({}, message, dense, layout).ok());
    const Result<std::span<const std::byte>> plain = builder.FinishPayloadFrame();
    ASSERT_TRUE(plain.ok());
    const Result<FrameView> view = DecodeFrame(*plain);
    ASSERT_TRUE(view.ok());
    EXPECT_FALSE(view->has_control);
    EXPECT_TRUE(view->control.view.values.empty());
  }
}

TEST(WireRoundTrip, AControlPayloadIsRefusedWhereItDoesNotBelong) {
  const TensorLayout layout = TensorLayout::Single(64).value();
  const CodecParams top_k = TopKParams{.k_ratio = 0.25f};
  const PayloadShape shape = EncodedShape(CodecParams{}, layout).value();
  AlignedStorage buffer(PayloadFrameBytes(shape) + ControlPayloadBytes(shape) +
                        kBuilderScratchBytes);
  FrameBuilder builder(buffer.bytes());
  EXPECT_EQ(builder.ReserveControlPayload(top_k, layout).status(), Status::FailedPrecondition());
  ASSERT_TRUE(builder.BeginPayloadFrame({}, PayloadMessage::Update({}), top_k, layout).ok());
  EXPECT_EQ(builder.ReserveControlPayload(CodecParams{}, layout).status(),
            Status::InvalidArgument());  // another codec than the Update's
  ASSERT_TRUE(builder.ReserveControlPayload(top_k, layout).ok());
  EXPECT_EQ(builder.ReserveControlPayload(top_k, layout).status(), Status::FailedPrecondition());
  builder.AbandonPayloadFrame();
  ASSERT_TRUE(
      builder.BeginPayloadFrame({}, PayloadMessage::ModelBroadcast({}), top_k, layout).ok());
  EXPECT_EQ(builder.ReserveControlPayload(top_k, layout).status(), Status::InvalidArgument());
  builder.AbandonPayloadFrame();
  ASSERT_TRUE(
      builder.BeginPayloadFrame({}, PayloadMessage::GossipExchange({}), top_k, layout).ok());
  EXPECT_EQ(builder.ReserveControlPayload(top_k, layout).status(), Status::FailedPrecondition());
  builder.AbandonPayloadFrame();

  // A builder sized for one payload has no room for the second, and the frame still finishes
  // without it.
  AlignedStorage single(FrameBuilderBytes(CodecParams{}, layout));
  FrameBuilder small(single.bytes());
  ASSERT_TRUE(small.BeginPayloadFrame({}, PayloadMessage::Update({}), CodecParams{}, layout).ok());
  EXPECT_EQ(small.ReserveControlPayload(CodecParams{}, layout).status(),
            Status::ResourceExhausted());
  const Result<std::span<const std::byte>> frame = small.FinishPayloadFrame();
  ASSERT_TRUE(frame.ok());
  const Result<FrameView> decoded = DecodeFrame(*frame);
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->has_control);
}

TEST(WireRoundTrip, TwoStepBuildWritesIntoTheFrame) {
  const TensorLayout layout = TensorLayout::Single(10).value();
  CodecParams params;  // identity
  AlignedStorage buffer(FrameBuilderBytes(params, layout));
  FrameBuilder builder(buffer.bytes());

  const Result<PayloadSpans> spans =
      builder.BeginPayloadFrame({.sender = 1}, PayloadMessage::ModelBroadcast({}), params, layout);
  ASSERT_TRUE(spans.ok());
  EXPECT_TRUE(builder.payload_frame_pending());
  ASSERT_EQ(spans->values.size(), 10u);
  EXPECT_TRUE(spans->indices.empty() && spans->words.empty() && spans->scales.empty());
  // The spans lie inside the builder's buffer: no staging copy.
  EXPECT_GE(reinterpret_cast<std::byte*>(spans->values.data()), buffer.bytes().data());
  EXPECT_LT(reinterpret_cast<std::byte*>(spans->values.data()),
            buffer.bytes().data() + buffer.bytes().size());
  for (std::size_t i = 0; i < 10; ++i) spans->values[i] = static_cast<float>(i) * 0.25f;

  // Nothing else may start while a payload frame is open.
  EXPECT_EQ(builder.EncodeHeartbeat({}, {}).status(), Status::FailedPrecondition());
  EXPECT_EQ(builder.BeginPayloadFrame({}, PayloadMessage::Update({}), params, layout).status(),
            Status::FailedPrecondition());

  const Result<std::span<const std::byte>> frame = builder.FinishPayloadFrame();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(builder.payload_frame_pending());
  EXPECT_EQ(builder.FinishPayloadFrame().status(), Status::FailedPrecondition());

  const Result<FrameView> decoded = DecodeFrame(*frame);
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->payload.view.values.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(decoded->payload.view.values[i], static_cast<float>(i) * 0.25f);
  }

  // Abandon drops the open frame and frees the builder.
  ASSERT_TRUE(builder.BeginPayloadFrame({}, PayloadMessage::Update({}), params, layout).ok());
  builder.AbandonPayloadFrame();
  EXPECT_TRUE(builder.EncodeHeartbeat({}, {}).ok());
}

TEST(WireRoundTrip, CodecFailureLeavesNoFramePending) {
  const TensorLayout layout = TensorLayout::Single(64).value();
  const CodecParams params = TopKParams{.k_ratio = 0.1f};
  AlignedStorage buffer(FrameBuilderBytes(params, layout));
  FrameBuilder builder(buffer.bytes());
  const std::vector<float> wrong_length(63, 1.0f);
  AlignedStorage scratch(CodecScratchBytes(params, layout));
  EXPECT_EQ(builder
                .EncodePayloadFrame({}, PayloadMessage::Update({}), AllCodecs(), params, layout, {},
                                    wrong_length, scratch.bytes())
                .status(),
            Status::InvalidArgument());
  EXPECT_FALSE(builder.payload_frame_pending());
  // A codec the program did not register cannot fill a frame either.
  const std::vector<float> input(64, 1.0f);
  EXPECT_EQ(builder
                .EncodePayloadFrame({}, PayloadMessage::Update({}), test_util::TopKOnlyCodecs(),
                                    SignParams{}, layout, {}, input, scratch.bytes())
                .status(),
            Status::FailedPrecondition());
  EXPECT_FALSE(builder.payload_frame_pending());
}

TEST(WireRoundTrip, RejectsBadBuilderArguments) {
  const TensorLayout layout = TensorLayout::Single(64).value();
  AlignedStorage buffer(4096);
  FrameBuilder builder(buffer.bytes());
  const CodecParams bad = TopKParams{.k_ratio = 0.0f};
  EXPECT_EQ(builder.BeginPayloadFrame({}, PayloadMessage::Update({}), bad, layout).status(),
            Status::InvalidArgument());
  PayloadMessage not_payload;
  not_payload.kind = MessageKind::kHeartbeat;
  EXPECT_EQ(builder.BeginPayloadFrame({}, not_payload, CodecParams{}, layout).status(),
            Status::InvalidArgument());
  PayloadMessage bad_enum = PayloadMessage::GossipExchange({});
  bad_enum.gossip.vector = static_cast<GossipVector>(77);
  EXPECT_EQ(builder.BeginPayloadFrame({}, bad_enum, CodecParams{}, layout).status(),
            Status::InvalidArgument());
  EXPECT_EQ(builder.EncodeLeave({}, {static_cast<LeaveReason>(9)}).status(),
            Status::InvalidArgument());
  EXPECT_EQ(builder.EncodeJoin({}, {.architecture = static_cast<Architecture>(200)}).status(),
            Status::InvalidArgument());
  EXPECT_EQ(builder.EncodeError({}, {static_cast<StatusCode>(250), "x"}).status(),
            Status::InvalidArgument());
  WelcomeInfo no_layout;
  EXPECT_EQ(builder.EncodeWelcome({}, no_layout).status(), Status::InvalidArgument());
  EXPECT_FALSE(builder.payload_frame_pending());
}

TEST(WireRoundTrip, CapacityIsCheckedBeforeWriting) {
  const TensorLayout layout = MultiTensorLayout();
  for (const CodecParams& params : TestCodecs()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    const PayloadShape shape = EncodedShape(params, layout).value();
    const std::size_t exact = PayloadFrameBytes(shape) + kBuilderScratchBytes;
    // Exactly the documented capacity suffices...
    AlignedStorage storage(exact);
    FrameBuilder exact_builder(storage.bytes().first(exact));
    EXPECT_EQ(exact_builder.capacity_bytes(), exact);
    ASSERT_TRUE(
        exact_builder.BeginPayloadFrame({}, PayloadMessage::Update({}), params, layout).ok());
    EXPECT_TRUE(exact_builder.FinishPayloadFrame().ok());
    // ... and anything less is refused up front.
    FrameBuilder small_builder(storage.bytes().first(exact - kFrameAlignment));
    EXPECT_EQ(
        small_builder.BeginPayloadFrame({}, PayloadMessage::Update({}), params, layout).status(),
        Status::ResourceExhausted());
    EXPECT_FALSE(small_builder.payload_frame_pending());
  }
  AlignedStorage tiny(kMaxControlFrameBytes);
  FrameBuilder control_builder(tiny.bytes().first(kMaxControlFrameBytes));
  EXPECT_EQ(control_builder.EncodeHeartbeat({}, {}).status(), Status::ResourceExhausted());
  FrameBuilder empty_builder({});
  EXPECT_EQ(empty_builder.capacity_bytes(), 0u);
  EXPECT_EQ(empty_builder.EncodeLeave({}, {}).status(), Status::ResourceExhausted());
}

TEST(WireRoundTrip, MisalignedBuilderStorageIsAlignedInside) {
  AlignedStorage storage(kMaxControlFrameBytes + kBuilderScratchBytes + 16);
  FrameBuilder builder(storage.bytes().subspan(3));
  EXPECT_EQ(builder.capacity_bytes() % kFrameAlignment, 0u);
  const Result<std::span<const std::byte>> frame = builder.EncodeHeartbeat({}, {1, 2});
  ASSERT_TRUE(frame.ok());
  EXPECT_TRUE(IsFrameAligned(*frame));
  EXPECT_TRUE(DecodeFrame(*frame).ok());
}

TEST(WireRoundTrip, OversizedPayloadIsOutOfRange) {
  // 2^28 + 1 floats of dense payload: above kMaxFrameBytes (1 GiB) without allocating anything.
  const TensorLayout layout = TensorLayout::Single((std::size_t{1} << 28) + 1).value();
  EXPECT_EQ(MaxFrameBytes(CodecParams{}, layout), 0u);
  EXPECT_EQ(FrameBuilderBytes(CodecParams{}, layout), 0u);
  AlignedStorage buffer(4096);
  FrameBuilder builder(buffer.bytes());
  EXPECT_EQ(
      builder.BeginPayloadFrame({}, PayloadMessage::Update({}), CodecParams{}, layout).status(),
      Status::OutOfRange());
}

WelcomeInfo LargestWelcome() {
  WelcomeInfo welcome;
  welcome.assigned_id = 0xFFFFFFFEu;
  welcome.workers = 0xFFFFFFFFu;
  welcome.rounds = 0xFFFFFFFFu;
  welcome.seed = 0xFFFFFFFFFFFFFFFFull;
  std::array<std::uint64_t, kMaxTensors> sizes{};
  for (std::size_t t = 0; t < kMaxTensors; ++t) sizes[t] = 1000 + t;
  welcome.layout = TensorLayout::FromSizes(sizes).value();
  // The codec with the most parameter words.
  static_assert([] {
    bool most = true;
    ForEachCodec([&most](auto codec) {
      most &= decltype(codec)::type::kFields.size() <= QsgdCodec::kFields.size();
    });
    return most;
  }());
  welcome.codec = QsgdParams{.levels = kMaxQsgdLevels,
                             .bucket = 0xFFFFFFFFu,
                             .schedule = QuantScheduleKind::kDq,
                             .bits_min = 3,
                             .bits_max = kMaxQsgdBits,
                             .dq_k = 20.0f,
                             .dq_rho = 0.99f};
  welcome.training = {.feedback = 255,
                      .detach = 0.3f,
                      .optimizer = 255,
                      .learning_rate = 0.05f,
                      .momentum = 0.9f,
                      .weight_decay = 1e-4f,
                      .local_steps = 0xFFFFFFFFu,
                      .batch = 0xFFFFFFFFu,
                      .aggregate = 255,
                      .participation = 0.5f,
                      .mode = 255,
                      .gossip = 255,
                      .topology = 255,
                      .gossip_rounds = 0xFFFFFFFFu};
  welcome.privacy = {.mode = 255,
                     .clip = 0.75f,
                     .noise_multiplier = 1.1f,
                     .delta = 1e-5f,
                     .target_quantile = 0.5f,
                     .clip_learning_rate = 0.2f,
                     .count_noise = 1.25f};
  welcome.secure = {.threshold = 0.75f, .neighbours = 0xFFFFFFFEu, .bound = 8.0f};
  return welcome;
}

TEST(WireRoundTrip, ControlMessages) {
  // Exactly the documented control-frame capacity, so the worst cases prove the bound.
  constexpr std::size_t kCapacity = kMaxControlFrameBytes + kBuilderScratchBytes;
  AlignedStorage storage(kCapacity);
  FrameBuilder builder(storage.bytes().first(kCapacity));
  const FrameHeader header{.sender = kUnassignedDevice, .round = 0, .sequence = 1};

  {
    const JoinInfo join{.architecture = HostArchitecture(),
                        .codecs = AllCodecs().Mask(),
                        .max_frame_bytes = 65536,
                        .memory_bytes = 1u << 20,
                        .features = 0xFFFFFFFFu};
    const auto frame = builder.EncodeJoin(header, join);
    ASSERT_TRUE(frame.ok());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->kind, MessageKind::kJoin);
    EXPECT_EQ(view->header, header);
    EXPECT_EQ(view->join, join);
  }
  {
    const WelcomeInfo welcome = LargestWelcome();
    const auto frame = builder.EncodeWelcome(header, welcome);
    ASSERT_TRUE(frame.ok());
    std::printf("[wire] largest Welcome frame (%zu tensors): %zu bytes (bound %zu)\n", kMaxTensors,
                frame->size(), kMaxControlFrameBytes);
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok()) << view.status().str();
    EXPECT_EQ(view->kind, MessageKind::kWelcome);
    EXPECT_EQ(view->welcome, welcome);
  }
  {
    WelcomeInfo defaults;  // all-default fields are omitted on the wire and decode the same
    defaults.layout = TensorLayout::Single(3).value();
    const auto frame = builder.EncodeWelcome(header, defaults);
    ASSERT_TRUE(frame.ok());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->welcome, defaults);
  }
  {
    const HeartbeatInfo heartbeat{.time_us = 123456789012345ull, .echo_time_us = 42};
    const auto frame = builder.EncodeHeartbeat(header, heartbeat);
    ASSERT_TRUE(frame.ok());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->kind, MessageKind::kHeartbeat);
    EXPECT_EQ(view->heartbeat, heartbeat);
  }
  for (const LeaveReason reason : {LeaveReason::kDone, LeaveReason::kLowPower}) {
    const auto frame = builder.EncodeLeave(header, {reason});
    ASSERT_TRUE(frame.ok());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->kind, MessageKind::kLeave);
    EXPECT_EQ(view->leave.reason, reason);
  }
  {
    const ErrorInfo error{StatusCode::kUnavailable, "worker 3 left"};
    const auto frame = builder.EncodeError(header, error);
    ASSERT_TRUE(frame.ok());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->kind, MessageKind::kError);
    EXPECT_EQ(view->error, error);
  }
  {
    // A long reason is cut at kMaxErrorReasonBytes, never inside a UTF-8 character: 119 ASCII
    // bytes then a 2-byte "é" straddling the limit leaves 119 bytes.
    std::string reason(kMaxErrorReasonBytes - 1, 'x');
    reason += "\xC3\xA9 and more";
    const auto frame = builder.EncodeError(header, {StatusCode::kDataLoss, reason});
    ASSERT_TRUE(frame.ok());
    std::printf("[wire] largest Error frame: %zu bytes\n", frame->size());
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->error.reason, std::string_view(reason).substr(0, kMaxErrorReasonBytes - 1));
    const auto empty = builder.EncodeError(header, {StatusCode::kInternal, ""});
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(DecodeFrame(*empty)->error.reason.empty());
  }
}

// Records whose every byte differs from its neighbours', so a misplaced field shows.
SecureKey PatternKey(std::uint8_t start) {
  SecureKey key;
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = std::byte(start + i);
  return key;
}

SecureSignature PatternSignature(std::uint8_t start) {
  SecureSignature signature;
  for (std::size_t i = 0; i < signature.size(); ++i) {
    signature[i] = static_cast<std::byte>(start + 3 * i);
  }
  return signature;
}

std::vector<SecureRosterRecord> PatternRoster(std::size_t count) {
  std::vector<SecureRosterRecord> roster(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto n = static_cast<std::uint32_t>(i);
    roster[i] = {100 + n, 1 + n, PatternKey(static_cast<std::uint8_t>(3 * n)),
                 PatternKey(static_cast<std::uint8_t>(3 * n + 101)),
                 PatternSignature(static_cast<std::uint8_t>(5 * n + 1))};
  }
  return roster;
}

std::vector<SecureSignatureRecord> PatternSignatures(std::size_t count) {
  std::vector<SecureSignatureRecord> signatures(count);
  for (std::size_t i = 0; i < count; ++i) {
    signatures[i] = {300 + static_cast<std::uint32_t>(i),
                     PatternSignature(static_cast<std::uint8_t>(7 * i + 2))};
  }
  return signatures;
}

std::vector<SecureSealedRecord> PatternShares(std::size_t count) {
  std::vector<SecureSealedRecord> shares(count);
  for (std::size_t i = 0; i < count; ++i) {
    shares[i].device = 7 * static_cast<std::uint32_t>(i) + 1;
    for (std::size_t b = 0; b < kSecureSealedBytes; ++b) shares[i].sealed[b] = std::byte(i + b);
  }
  return shares;
}

std::vector<SecureShareRecord> PatternReveals(std::size_t count) {
  std::vector<SecureShareRecord> revealed(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto n = static_cast<std::uint32_t>(i);
    revealed[i].owner = 40 + n;
    revealed[i].kind = (i % 2 == 0) ? kSecureSeedShare : kSecureMaskKeyShare;
    for (std::size_t w = 0; w < kSecureShareWords; ++w) {
      revealed[i].y[w] = 0xFFFFFFFEu - 13 * n - static_cast<std::uint32_t>(w);
    }
  }
  return revealed;
}

template <typename Record>
std::vector<Record> Collect(const SecureRecords<Record>& records) {
  std::vector<Record> out;
  for (std::size_t i = 0; i < records.size(); ++i) out.push_back(records[i]);
  return out;
}

// Every phase's message of a device with `kNeighbours` neighbours and `kWords` masked words
// travels intact within SecureFrameBytes.
void CheckEverySecurePhase(std::size_t neighbours, std::size_t words) {
  const std::size_t survivor_count = 2 * neighbours + 3;  // signed rounds: the whole set
  const std::size_t bound = SecureFrameBytes(neighbours, words, survivor_count);
  AlignedStorage storage(bound + kBuilderScratchBytes);
  FrameBuilder builder(storage.bytes().first(bound + kBuilderScratchBytes));
  const FrameHeader header{.sender = 12, .round = 5, .sequence = 77};

  const std::vector<SecureRosterRecord> roster = PatternRoster(neighbours);
  const std::vector<SecureSealedRecord> shares = PatternShares(neighbours);
  const std::vector<SecureShareRecord> revealed = PatternReveals(neighbours + 1);
  std::vector<std::uint32_t> masked(words);
  for (std::size_t i = 0; i < words; ++i) masked[i] = 0x9E3779B9u * static_cast<std::uint32_t>(i);
  std::vector<std::uint32_t> survivors;
  for (std::size_t i = 0; i < survivor_count; ++i) {
    survivors.push_back(static_cast<std::uint32_t>(5 * i + 1));
  }
  const std::vector<SecureSignatureRecord> signatures = PatternSignatures(neighbours);

  // Every message also names the lists of the other phases: only its own may travel.
  SecureMessage message;
  message.fields = {.phase = SecurePhase::kKeys,
                    .cipher_public = PatternKey(1),
                    .mask_public = PatternKey(50),
                    .threshold = 10,
                    .share_point = 3,
                    .commitment = PatternKey(200),
                    .signature = PatternSignature(9)};
  message.roster = roster;
  message.signatures = signatures;
  message.shares = shares;
  message.masked = masked;
  message.survivors = survivors;
  message.revealed = revealed;

  for (std::uint8_t p = 0; p <= static_cast<std::uint8_t>(SecurePhase::kSignatures); ++p) {
    const auto phase = static_cast<SecurePhase>(p);
    message.fields.phase = phase;
    const auto frame = builder.EncodeSecure(header, message);
    ASSERT_TRUE(frame.ok()) << frame.status().str();
    EXPECT_LE(frame->size(), bound);
    const auto view = DecodeFrame(*frame);
    ASSERT_TRUE(view.ok()) << view.status().str();
    ASSERT_EQ(view->kind, MessageKind::kSecureAggregation);
    EXPECT_EQ(view->header, header);
    const SecureView& secure = view->secure;
    EXPECT_EQ(secure.fields.phase, phase);

    std::size_t list_bytes = 0;
    SecureFields expected{.phase = phase};
    switch (phase) {
      case SecurePhase::kKeys:
        expected.cipher_public = message.fields.cipher_public;
        expected.mask_public = message.fields.mask_public;
        expected.signature = message.fields.signature;
        break;
      case SecurePhase::kRoster:
        expected.threshold = 10;
        expected.share_point = 3;
        EXPECT_EQ(Collect(secure.roster), roster);
        list_bytes = roster.size() * kSecureRosterRecordBytes;
        break;
      case SecurePhase::kShares:
        expected.commitment = message.fields.commitment;
        [[fallthrough]];
      case SecurePhase::kDeliveredShares:
        EXPECT_EQ(Collect(secure.shares), shares);
        list_bytes = shares.size() * kSecureSealedRecordBytes;
        break;
      case SecurePhase::kMaskedInput:
        EXPECT_TRUE(
            std::equal(secure.masked.begin(), secure.masked.end(), masked.begin(), masked.end()));
        list_bytes = 4 * masked.size();
        break;
      case SecurePhase::kSurvivors:
        EXPECT_TRUE(std::equal(secure.survivors.begin(), secure.survivors.end(), survivors.begin(),
                               survivors.end()));
        list_bytes = 4 * survivors.size();
        break;
      case SecurePhase::kUnmasking:
        EXPECT_EQ(Collect(secure.revealed), revealed);
        list_bytes = revealed.size() * kSecureShareRecordBytes;
        break;
      case SecurePhase::kConsistency:
        expected.signature = message.fields.signature;
        break;
      case SecurePhase::kSignatures:
        EXPECT_EQ(Collect(secure.signatures), signatures);
        list_bytes = signatures.size() * kSecureSignatureRecordBytes;
        break;
    }
    EXPECT_EQ(secure.fields, expected);
    // The lists of other phases stay empty.
    EXPECT_EQ(secure.roster.empty(), phase != SecurePhase::kRoster);
    EXPECT_EQ(secure.masked.empty(), phase != SecurePhase::kMaskedInput);
    EXPECT_EQ(secure.survivors.empty(), phase != SecurePhase::kSurvivors);
    EXPECT_EQ(secure.revealed.empty(), phase != SecurePhase::kUnmasking);
    EXPECT_EQ(secure.signatures.empty(), phase != SecurePhase::kSignatures);
    EXPECT_LE(frame->size() - list_bytes, kSecureFrameOverheadBytes);
    std::printf(
        "[wire] secure aggregation, %zu neighbours, phase %d: %zu bytes, %zu beside "
        "its list\n",
        neighbours, p, frame->size(), frame->size() - list_bytes);
  }

  // An unsigned roster and advertisement carry no signatures and decode with zeros.
  std::vector<SecureRosterRecord> unsigned_roster = roster;
  for (SecureRosterRecord& entry : unsigned_roster) entry.keys_signature = {};
  message.roster = unsigned_roster;
  message.fields.phase = SecurePhase::kRoster;
  const auto unsigned_frame = builder.EncodeSecure(header, message);
  ASSERT_TRUE(unsigned_frame.ok());
  const auto unsigned_view = DecodeFrame(*unsigned_frame);
  ASSERT_TRUE(unsigned_view.ok());
  EXPECT_EQ(Collect(unsigned_view->secure.roster), unsigned_roster);

  // Empty lists travel as absent fields and decode as empty.
  message = {};
  message.fields.phase = SecurePhase::kSurvivors;
  const auto empty = builder.EncodeSecure(header, message);
  ASSERT_TRUE(empty.ok());
  const auto empty_view = DecodeFrame(*empty);
  ASSERT_TRUE(empty_view.ok());
  EXPECT_TRUE(empty_view->secure.survivors.empty());
}

TEST(WireRoundTrip, EverySecureAggregationPhase) {
  // Odd record counts and record sizes that are not powers of two must still give aligned frames;
  // 14 neighbours and 3,181 words is SecAgg+ for a cohort of 100 with random_block 1/64 of the
  // 256-unit MLP.
  CheckEverySecurePhase(1, 1);
  CheckEverySecurePhase(3, 5);
  CheckEverySecurePhase(14, 3181);
}

TEST(WireRoundTrip, SecureAggregationEncoderRefusals) {
  constexpr std::size_t kCapacity = 4096;
  AlignedStorage storage(kCapacity);
  FrameBuilder builder(storage.bytes().first(kCapacity));
  const FrameHeader header{.sender = 1, .round = 1, .sequence = 1};
  SecureMessage message;

  message.fields.phase = static_cast<SecurePhase>(9);
  EXPECT_EQ(builder.EncodeSecure(header, message).status().code(), StatusCode::kInvalidArgument);

  std::vector<SecureShareRecord> revealed = PatternReveals(2);
  revealed[1].kind = 2;
  message.fields.phase = SecurePhase::kUnmasking;
  message.revealed = revealed;
  EXPECT_EQ(builder.EncodeSecure(header, message).status().code(), StatusCode::kInvalidArgument);

  // Too many words for the buffer: refused before anything is written.
  const std::vector<std::uint32_t> masked(kCapacity / 4);
  message = {};
  message.fields.phase = SecurePhase::kMaskedInput;
  message.masked = masked;
  EXPECT_EQ(builder.EncodeSecure(header, message).status().code(), StatusCode::kResourceExhausted);
  // ... while the same list in another phase's message is not written and fits.
  message.fields.phase = SecurePhase::kKeys;
  EXPECT_TRUE(builder.EncodeSecure(header, message).ok());

  // Not while a payload frame is begun.
  const TensorLayout layout = TensorLayout::Single(4).value();
  ASSERT_TRUE(builder
                  .BeginPayloadFrame(header, PayloadMessage::Update({.worker = 1}),
                                     IdentityParams{}, layout)
                  .ok());
  EXPECT_EQ(builder.EncodeSecure(header, message).status().code(), StatusCode::kFailedPrecondition);
  builder.AbandonPayloadFrame();
}

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Clang 14 does not deduce an aggregate's template arguments (C++20's P1816) without a guide.
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

// Theoretical payload bytes of each codec, written from the codecs' documented formats rather
// than from EncodedShape, so the frames are checked against the algorithms' bit counts.
std::size_t TheoreticalPayloadBytes(const CodecParams& params, const TensorLayout& layout) {
  std::size_t bytes = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t n = layout.size(t);
    bytes += std::visit(
        Overloaded{[n](const IdentityParams&) { return 4 * n; },
                   // u32 index + f32 value per kept coordinate
                   [n](const TopKParams& p) { return 8 * SparseCount(n, p.k_ratio).value(); },
                   [n](const RegTopKParams& p) { return 8 * SparseCount(n, p.k_ratio).value(); },
                   // values only: indices follow from the shared seed
                   [n](const RandKParams& p) { return 4 * SparseCount(n, p.k_ratio).value(); },
                   // one start + the block's values
                   [n](const RandomBlockParams& p) {
                     const std::size_t block = n / p.block_ratio;
                     return 4 + 4 * (block == 0 ? 1 : block);
                   },
                   // 1 bit per coordinate in whole u32 words + one f32 scale
                   [n](const SignParams&) { return 4 * ((n + 31) / 32) + 4; },
                   [n](const StochasticSignParams&) { return 4 * ((n + 31) / 32) + 4; },
                   // (1 + ceil(log2(s+1))) bits per coordinate + a norm per bucket
                   [n](const QsgdParams& p) {
                     const std::size_t bits = n * QsgdBitsPerCoordinate(p.levels);
                     return 4 * ((bits + 31) / 32) + 4 * ((n + p.bucket - 1) / p.bucket);
                   },
                   // an exponent byte per coordinate, then a sign bit per coordinate, each
                   // plane in whole u32 words
                   [n](const NaturalParams&) { return 4 * ((n + 3) / 4) + 4 * ((n + 31) / 32); },
                   // two halves per u32 word
                   [n](const Fp16Params&) { return 4 * ((n + 1) / 2); }},
        params);
  }
  return bytes;
}

TEST(WireFrameSize, MatchesCodecTheoryPlusConstantOverhead) {
  std::printf(
      "[wire] kPayloadFrameOverheadBytes = %zu (bound), kBuilderScratchBytes = %zu, "
      "kMaxControlFrameBytes = %zu\n",
      kPayloadFrameOverheadBytes, kBuilderScratchBytes, kMaxControlFrameBytes);
  std::printf("[wire] %-12s %-14s %9s %10s %10s %8s %9s\n", "codec", "message", "d", "payload",
              "frame", "overhead", "bits/coord");
  const std::uint64_t single[] = {4096};
  const std::uint64_t odd[] = {1000, 33, 7};
  const std::uint64_t large[] = {65536, 1023, 1};
  const std::array<TensorLayout, 3> layouts = {TensorLayout::FromSizes(single).value(),
                                               TensorLayout::FromSizes(odd).value(),
                                               TensorLayout::FromSizes(large).value()};
  const char* const message_names[] = {"", "", "", "broadcast", "update", "gossip"};
  std::array<std::size_t, kCodecCount> min_overhead{};
  std::array<std::size_t, kCodecCount> max_overhead{};
  min_overhead.fill(SIZE_MAX);

  for (const CodecParams& params : TestCodecs()) {
    const CodecId k = CodecIdOf(params);
    for (const TensorLayout& layout : layouts) {
      const std::vector<float> input = RandomInput(layout.dimension(), 3);
      const std::size_t payload_bytes = MaxEncodedBytes(params, layout);
      ASSERT_EQ(payload_bytes, TheoreticalPayloadBytes(params, layout))
          << CodecName(params) << " d=" << layout.dimension();
      AlignedStorage scratch(CodecScratchBytes(params, layout));
      AlignedStorage buffer(FrameBuilderBytes(params, layout));
      FrameBuilder builder(buffer.bytes());
      for (const PayloadMessage& message : AllPayloadMessages()) {
        const auto frame =
            builder.EncodePayloadFrame({.sender = 1, .round = 1, .sequence = 1}, message,
                                       AllCodecs(), params, layout, {}, input, scratch.bytes());
        ASSERT_TRUE(frame.ok());
        ASSERT_GE(frame->size(), payload_bytes);
        const std::size_t overhead = frame->size() - payload_bytes;
        EXPECT_LE(overhead, kPayloadFrameOverheadBytes);
        min_overhead[k] = std::min(min_overhead[k], overhead);
        max_overhead[k] = std::max(max_overhead[k], overhead);
        std::printf(
            "[wire] %-12s %-14s %9zu %10zu %10zu %8zu %9.4f\n",
            std::string(CodecName(params)).c_str(),
            message_names[static_cast<std::size_t>(message.kind)], layout.dimension(),
            payload_bytes, frame->size(), overhead,
            8.0 * static_cast<double>(frame->size()) / static_cast<double>(layout.dimension()));
      }
    }
  }
  for (CodecId k = 0; k < kCodecCount; ++k) {
    std::printf("[wire] %-12s frame = payload + %zu..%zu bytes\n",
                std::string(CodecName(k)).c_str(), min_overhead[k], max_overhead[k]);
    // Constant up to the message kind's own fields and alignment padding: never grows with d.
    EXPECT_LE(max_overhead[k] - min_overhead[k], 24u);
  }
}

TEST(WireFrameSize, SignFrameIsOneBitPerCoordinate) {
  // d = 2^20 in one tensor: d/8 bytes of sign words + one scale + the constant overhead.
  const std::size_t d = std::size_t{1} << 20;
  const TensorLayout layout = TensorLayout::Single(d).value();
  const CodecParams params = SignParams{};
  const std::vector<float> input = RandomInput(d, 9);
  AlignedStorage buffer(FrameBuilderBytes(params, layout));
  FrameBuilder builder(buffer.bytes());
  const auto frame = builder.EncodePayloadFrame({}, PayloadMessage::Update({}), AllCodecs(), params,
                                                layout, {}, input, {});
  ASSERT_TRUE(frame.ok());
  EXPECT_GE(frame->size(), d / 8 + 4);
  EXPECT_LE(frame->size(), d / 8 + 4 + kPayloadFrameOverheadBytes);
}

// Frames are byte-identical for identical inputs, on every architecture: the expected bytes live
// in tests/golden/frame_golden.h, checked here on x86-64, aarch64 and armhf (this binary runs
// under qemu-user) and by the Cortex-M image tests/embedded/mcu_golden.cc.
TEST(WireGolden, FixedFramesHaveFixedBytes) {
  const bool print = std::getenv("EDGESGD_PRINT_GOLDEN") != nullptr;
  const auto buffers = std::make_unique<golden::FrameBuffers>();
  FrameBuilder builder(buffers->builder);

  const auto heartbeat = golden::EncodeHeartbeat(builder);
  ASSERT_TRUE(heartbeat.ok());
  if (print) std::printf("heartbeat:\n\"%s\"\n", Hex(*heartbeat).c_str());
  EXPECT_EQ(Hex(*heartbeat), golden::kHeartbeatFrameHex);

  for (const golden::FrameCase& expected : golden::kSmallUpdateFrames) {
    const auto update = golden::EncodeSmallUpdate(builder, expected);
    ASSERT_TRUE(update.ok());
    if (print) std::printf("small %s:\n\"%s\"\n", expected.name, Hex(*update).c_str());
    EXPECT_EQ(Hex(*update), expected.frame_hex) << expected.name;
  }
  // Every codec's Update frame over the codec golden input: the payload bytes of
  // codec_golden.h inside a frame.
  const auto case_buffers = std::make_unique<golden::CaseBuffers>();
  for (std::size_t i = 0; i < std::size(golden::kCodecCases); ++i) {
    const auto update = golden::EncodeCodecUpdate(builder, i, *case_buffers);
    ASSERT_TRUE(update.ok()) << golden::kCodecCases[i].name;
    const std::string actual = Hex(*update);
    if (print) std::printf("%s:\n\"%s\"\n", golden::kCodecCases[i].name, actual.c_str());
    EXPECT_EQ(actual, golden::kCodecUpdateFrameHex[i]) << golden::kCodecCases[i].name;
    EXPECT_TRUE(golden::BytesMatchHex(*update, golden::kCodecUpdateFrameHex[i]));
  }
  // Building the same frame twice gives the same bytes (no stale data from the previous frame).
  const FrameHeader header = golden::kFrameHeader;
  const std::string first = Hex(*builder.EncodeLeave(header, {LeaveReason::kShutdown}));
  ASSERT_TRUE(builder.EncodeWelcome(header, LargestWelcome()).ok());
  EXPECT_EQ(Hex(*builder.EncodeLeave(header, {LeaveReason::kShutdown})), first);
}

}  // namespace
}  // namespace edgesgd::wire
