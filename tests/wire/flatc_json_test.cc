// Captured frames are readable with the stock FlatBuffers tool: a frame written to a file and
// decoded by the real `flatc --json` shows the fields and values that were encoded.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/wire_format.h"

#if !defined(EDGESGD_WIRE_SCHEMA_PATH) || !defined(EDGESGD_FLATC_PATH)
#error "transport/wire/CMakeLists.txt defines the schema and flatc paths for wire_tests"
#endif

namespace edgesgd::wire {
namespace {

// Writes `frame` to a file, runs flatc on it and returns the JSON without whitespace ("" if
// flatc failed).
std::string FlatcJson(std::span<const std::byte> frame, const std::string& name) {
  const std::string dir = ::testing::TempDir();
  const std::string binary = dir + name + ".bin";
  {
    std::ofstream out(binary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(frame.data()),
              static_cast<std::streamsize>(frame.size()));
  }
  const std::string command = std::string(EDGESGD_FLATC_PATH) +
                              " --json --strict-json --size-prefixed --raw-binary -o " + dir + " " +
                              EDGESGD_WIRE_SCHEMA_PATH + " -- " + binary;
  if (std::system(command.c_str()) != 0) return "";
  std::ifstream in(dir + name + ".json");
  std::string json;
  for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it) {
    if (*it != ' ' && *it != '\n' && *it != '\r' && *it != '\t') json += *it;
  }
  return json;
}

TEST(WireFlatc, DecodesTopKUpdate) {
  const TensorLayout layout = TensorLayout::Single(8).value();
  const CodecParams params = TopKParams{.k_ratio = 0.25f};  // k = 2 of 8
  const float input[] = {0.0f, 5.0f, 0.0f, 0.0f, -7.0f, 0.0f, 0.0f, 1.0f};
  std::vector<std::uint64_t> storage(FrameBuilderBytes(params, layout) / 8 + 1);
  std::vector<std::uint64_t> scratch(CodecScratchBytes(params, layout) / 8 + 1);
  FrameBuilder builder(std::as_writable_bytes(std::span<std::uint64_t>(storage)));
  const auto frame = builder.EncodePayloadFrame(
      {.sender = 7, .round = 3, .sequence = 42},
      PayloadMessage::Update({.worker = 5, .samples = 32}), AllCodecs(), params, layout, {}, input,
      std::as_writable_bytes(std::span<std::uint64_t>(scratch)));
  ASSERT_TRUE(frame.ok());

  const std::string json = FlatcJson(*frame, "wire_top_k_update");
  ASSERT_FALSE(json.empty()) << "flatc failed";
  for (const char* expected :
       {"\"version\":2", "\"sender\":7", "\"round\":3", "\"sequence\":42",
        "\"message_type\":\"Update\"", "\"worker\":5", "\"samples\":32", "\"codec\":1,",
        "\"payload_type\":\"SparsePayload\"", "\"indices\":[1,4]", "\"values\":[5.0,-7.0]"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " not in " << json;
  }
}

TEST(WireFlatc, DecodesWelcomeAndQuantizedBroadcast) {
  constexpr std::size_t kCapacity = kMaxControlFrameBytes + kBuilderScratchBytes;
  std::vector<std::uint64_t> storage(kCapacity / 8 + 1);
  FrameBuilder builder(std::as_writable_bytes(std::span<std::uint64_t>(storage)));

  WelcomeInfo welcome;
  welcome.assigned_id = 3;
  welcome.workers = 8;
  welcome.rounds = 500;
  welcome.seed = 0x1234567890ull;
  const std::uint64_t sizes[] = {784, 10};
  welcome.layout = TensorLayout::FromSizes(sizes).value();
  welcome.codec = QsgdParams{.levels = 7, .bucket = 128};
  welcome.training.learning_rate = 0.5f;
  welcome.training.local_steps = 4;
  const auto frame = builder.EncodeWelcome({.sender = 0, .round = 0, .sequence = 1}, welcome);
  ASSERT_TRUE(frame.ok());
  const std::string json = FlatcJson(*frame, "wire_welcome");
  ASSERT_FALSE(json.empty()) << "flatc failed";
  for (const char* expected :
       {"\"message_type\":\"Welcome\"", "\"assigned_id\":3", "\"workers\":8", "\"rounds\":500",
        "\"seed\":78187493520", "\"dimension\":794", "\"tensor_sizes\":[784,10]",
        // qsgd (5): bits (the level count), bucket, fixed schedule, bits_min 2, bits_max 8,
        // dq_k 20.0 and dq_rho 0.99 as their IEEE-754 bits, no shared scale.
        "\"codec\":{\"codec\":5,\"parameters\":[7,128,0,2,8,1101004800,1065185444,0]}",
        "\"learning_rate\":0.5", "\"local_steps\":4"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " not in " << json;
  }

  // A qsgd aggregate broadcast: levels and bucket travel with the payload.
  const TensorLayout layout = TensorLayout::Single(40).value();
  const CodecParams params = QsgdParams{.levels = 3, .bucket = 16};
  const auto spans = builder.BeginPayloadFrame(
      {.sender = 0, .round = 9, .sequence = 2},
      PayloadMessage::ModelBroadcast({.content = BroadcastContent::kAggregate, .participants = 6}),
      params, layout);
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->words.size(), 4u);   // 40 coordinates x 3 bits = 120 bits
  ASSERT_EQ(spans->scales.size(), 3u);  // ceil(40 / 16) buckets
  for (std::size_t i = 0; i < spans->words.size(); ++i) {
    spans->words[i] = static_cast<std::uint32_t>(i + 1);
  }
  for (std::size_t i = 0; i < spans->scales.size(); ++i) {
    spans->scales[i] = 0.25f * static_cast<float>(i + 1);
  }
  const auto broadcast = builder.FinishPayloadFrame();
  ASSERT_TRUE(broadcast.ok());
  const std::string broadcast_json = FlatcJson(*broadcast, "wire_qsgd_broadcast");
  ASSERT_FALSE(broadcast_json.empty()) << "flatc failed";
  for (const char* expected :
       {"\"round\":9", "\"message_type\":\"ModelBroadcast\"", "\"content\":\"Aggregate\"",
        "\"participants\":6", "\"codec\":5,", "\"payload_type\":\"QuantizedPayload\"",
        "\"words\":[1,2,3,4]", "\"norms\":[0.25,0.5,0.75]", "\"levels\":3", "\"bucket\":16"}) {
    EXPECT_NE(broadcast_json.find(expected), std::string::npos)
        << expected << " not in " << broadcast_json;
  }
}

}  // namespace
}  // namespace edgesgd::wire
