#pragma once

// Helpers the core tests share: arenas and payload storage over test-owned heap memory, layouts,
// dense decoding and mixed special-value inputs. Header-only; tests may allocate.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/random.h"
#include "edgesgd/core/tensor_layout.h"

// Not edgesgd::testing: that would hide GoogleTest's ::testing inside namespace edgesgd.
namespace edgesgd::test_util {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// d values uniform in [-half_width, half_width), one Philox stream per vector: inputs that are
// the same on every machine.
inline std::vector<float> UniformVector(std::size_t d, std::uint64_t key, std::uint32_t stream,
                                        float half_width) {
  std::vector<float> v(d);
  CounterRng rng(key, 0, 0, stream);
  for (float& x : v) x = half_width * (2.0f * rng.NextFloat() - 1.0f);
  return v;
}

// Classic error feedback with learning rate 1, no momentum and one local step: p = g + e, and the
// new residual is exactly what compression left out of p.
inline constexpr FeedbackParams kUnitStepEf{.kind = FeedbackKind::kEf,
                                            .detach = 0.0f,
                                            .learning_rate = 1.0f,
                                            .momentum = 0.0f,
                                            .weight_decay = 0.0f,
                                            .local_steps = 1};

// `size` standard normal values from std::mt19937 seeded with `seed`.
inline std::vector<float> GaussianVector(std::size_t size, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size);
  for (float& v : x) v = normal(engine);
  return x;
}

// An arena of exactly `bytes` capacity over test-owned heap storage.
struct ArenaBox {
  explicit ArenaBox(std::size_t bytes) : storage(bytes + kArenaAlignment), arena(Aligned(bytes)) {}
  std::span<std::byte> Aligned(std::size_t bytes) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    const std::size_t skip = (kArenaAlignment - address % kArenaAlignment) % kArenaAlignment;
    return std::span<std::byte>(storage).subspan(skip, bytes);
  }
  std::vector<std::byte> storage;
  Arena arena;
};

// Storage for one payload of a given shape.
struct PayloadBuffers {
  explicit PayloadBuffers(const PayloadShape& shape)
      : indices(shape.indices), values(shape.values), words(shape.words), scales(shape.scales) {}
  PayloadSpans spans() { return {indices, values, words, scales}; }
  PayloadView view() const { return PayloadView(indices, values, words, scales); }
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::vector<std::uint32_t> words;
  std::vector<float> scales;
};

inline TensorLayout Layout(const std::vector<std::uint64_t>& sizes) {
  return TensorLayout::FromSizes(sizes).value();
}

// The sparsity and quantization of a test's codec list (EveryCodec); every other parameter keeps
// its default.
struct CodecSettings {
  float k_ratio = 0.2f;           // top_k, rand_k, reg_top_k
  std::uint32_t block_ratio = 4;  // random_block
  std::uint32_t qsgd_levels = 15;
  std::uint32_t qsgd_bucket = 16;
};

// One configuration of every known codec, in id order: its defaults with `settings` applied to
// the codecs that have those fields.
inline std::vector<CodecParams> EveryCodec(const CodecSettings& settings) {
  std::vector<CodecParams> every;
  for (std::size_t id = 0; id < kCodecCount; ++id) {
    CodecParams params = DefaultCodecParams(static_cast<CodecId>(id)).value();
    std::visit(
        [&settings](auto& p) {
          if constexpr (requires { p.k_ratio; }) p.k_ratio = settings.k_ratio;
          if constexpr (requires { p.block_ratio; }) p.block_ratio = settings.block_ratio;
          if constexpr (requires { p.levels; }) p.levels = settings.qsgd_levels;
          if constexpr (requires { p.bucket; }) p.bucket = settings.qsgd_bucket;
        },
        params);
    every.push_back(params);
  }
  return every;
}

// The ids of the registered codecs whose traits satisfy `keep` (every codec without one), in id
// order, for INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(CodecIds()), CodecIdName).
inline std::vector<CodecId> CodecIds(bool (*keep)(const CodecTraits&) = nullptr) {
  std::vector<CodecId> ids;
  for (std::size_t id = 0; id < kCodecCount; ++id) {
    const auto codec = static_cast<CodecId>(id);
    if (keep == nullptr || keep(TraitsOf(DefaultCodecParams(codec).value()))) ids.push_back(codec);
  }
  return ids;
}

// A parameterised test's name suffix: the codec's name.
inline std::string CodecIdName(const ::testing::TestParamInfo<CodecId>& info) {
  return std::string(CodecName(info.param));
}

// The registry of a program that links top_k and no other codec.
inline const CodecRegistry& TopKOnlyCodecs() {
  static constexpr auto kOps = MakeCodecOps<TopKCodec>();
  static constexpr CodecRegistry kRegistry(kOps);
  return kRegistry;
}

// Dense decode of a payload into a fresh vector.
inline std::vector<float> DecodeDense(const CodecParams& codec, const TensorLayout& layout,
                                      const CodecContext& context, const PayloadView& payload) {
  std::vector<float> out(layout.dimension(), 0.0f);
  std::vector<std::byte> scratch(CodecScratchBytes(codec, layout));
  EXPECT_TRUE(AllCodecs().DecodeAdd(codec, layout, context, payload, 1.0f, out, scratch).ok());
  return out;
}

// Standard normal values with special ones mixed in. Each coordinate first draws a kind,
// uniform in [0, kinds): kind 0 is +0.0, kind 1 is -0.0, and any other kind is
// special(kind, normal), where normal() draws the next standard normal value. The draws come from
// one mt19937 seeded with `seed`, so a test's input is fixed by (size, seed, kinds, special).
template <typename Special>
std::vector<float> MixedInput(std::size_t size, std::uint32_t seed, int kinds, Special special) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, kinds - 1);
  const auto draw_normal = [&] { return normal(engine); };
  std::vector<float> x(size);
  for (float& v : x) {
    switch (const int k = kind(engine)) {
      case 0:
        v = 0.0f;
        break;
      case 1:
        v = -0.0f;
        break;
      default:
        v = special(k, draw_normal);
        break;
    }
  }
  return x;
}

}  // namespace edgesgd::test_util
