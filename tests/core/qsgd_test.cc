#include "edgesgd/core/codecs/qsgd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/internal/bit_packing.h"
#include "edgesgd/core/internal/reduce.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

using test_util::GaussianVector;
using test_util::Layout;

using internal::QsgdKernel;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr QsgdKernel kAllKernels[] = {QsgdKernel::kAuto, QsgdKernel::kPortable, QsgdKernel::kSse2,
                                      QsgdKernel::kAvx2, QsgdKernel::kAvx512};

std::vector<QsgdKernel> SupportedKernels() {
  std::vector<QsgdKernel> kernels;
  for (const QsgdKernel kernel : kAllKernels) {
    if (internal::QsgdKernelSupported(kernel)) kernels.push_back(kernel);
  }
  return kernels;
}

// Gaussian values with zeros of both signs, subnormals, tiny and large magnitudes mixed in.
std::vector<float> MixedInput(std::size_t size, std::uint32_t seed) {
  return test_util::MixedInput(size, seed, 16, [](int kind, auto normal) {
    switch (kind) {
      case 2:
        return normal() * 1e-40f;
      case 3:
        return normal() * 1e6f;
      case 4:
        return normal() * 1e-3f;
      default:
        return normal();
    }
  });
}

struct Encoded {
  std::vector<std::uint32_t> words;
  std::vector<float> norms;
  PayloadView View() const { return PayloadView({}, {}, words, norms); }
};

Encoded Encode(const QsgdParams& params, const TensorLayout& layout, const CodecContext& context,
               const std::vector<float>& input, QsgdKernel kernel = QsgdKernel::kAuto) {
  const PayloadShape shape = QsgdCodec::Shape(params, layout).value();
  Encoded encoded;
  encoded.words.assign(shape.words, 0xDEADBEEFu);  // garbage: Encode must write every word
  encoded.norms.assign(shape.scales, -7.0f);
  PayloadSpans out{{}, {}, encoded.words, encoded.norms};
  EXPECT_EQ(internal::QsgdEncodeWith(kernel, params, layout, context, input, out, {}),
            Status::Ok());
  return encoded;
}

std::vector<float> Decode(const QsgdParams& params, const TensorLayout& layout,
                          const Encoded& encoded, float weight = 1.0f,
                          QsgdKernel kernel = QsgdKernel::kAuto) {
  std::vector<float> acc(layout.dimension(), 0.0f);
  EXPECT_EQ(internal::QsgdDecodeAddWith(kernel, params, layout, CodecContext{}, encoded.View(),
                                        weight, acc, {}),
            Status::Ok());
  return acc;
}

// ---- Reference implementation, one coordinate at a time, straight from qsgd.h's definition.

void NaiveWriteField(std::vector<std::uint32_t>& words, std::size_t first_word, std::size_t index,
                     std::uint32_t width, std::uint32_t value) {
  for (std::uint32_t k = 0; k < width; ++k) {
    if ((value >> k) & 1u) {
      const std::size_t bit = index * width + k;
      words[first_word + bit / 32] |= 1u << (bit % 32);
    }
  }
}

std::uint32_t NaiveReadField(const std::vector<std::uint32_t>& words, std::size_t first_word,
                             std::size_t index, std::uint32_t width) {
  std::uint32_t value = 0;
  for (std::uint32_t k = 0; k < width; ++k) {
    const std::size_t bit = index * width + k;
    value |= ((words[first_word + bit / 32] >> (bit % 32)) & 1u) << k;
  }
  return value;
}

Encoded ReferenceEncode(const QsgdParams& params, const TensorLayout& layout,
                        const CodecContext& context, const std::vector<float>& input) {
  const std::uint32_t s = params.levels;
  const std::uint32_t width = QsgdBitsPerCoordinate(s);
  const auto levels = static_cast<float>(s);
  Encoded encoded;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t first_word = encoded.words.size();
    encoded.words.resize(first_word + QsgdCodec::WordsFor(layout.size(t), s), 0u);
    const float* x = input.data() + layout.offset(t);
    for (std::size_t begin = 0; begin < layout.size(t); begin += params.bucket) {
      const std::size_t end = std::min<std::size_t>(begin + params.bucket, layout.size(t));
      const float norm = std::sqrt(internal::SumSquares({x + begin, end - begin}));
      encoded.norms.push_back(norm);
      const float factor = norm > 0.0f ? levels / norm : 0.0f;
      for (std::size_t i = begin; i < end; ++i) {
        const float ratio = std::min(std::fabs(x[i]) * factor, levels);
        const auto floor_level = static_cast<std::uint32_t>(ratio);
        const PhiloxBlock block =
            Philox4x32_10({context.round, static_cast<std::uint32_t>(t),
                           StreamId(RandomPurpose::kQuantizationDither, context.worker),
                           static_cast<std::uint32_t>(i / 4)},
                          KeyFromSeed(context.seed));
        const float u = UniformFloat(block[i % 4]);
        const std::uint32_t level =
            floor_level + (u < ratio - static_cast<float>(floor_level) ? 1u : 0u);
        const std::uint32_t sign = std::signbit(x[i]) ? 1u : 0u;
        NaiveWriteField(encoded.words, first_word, i, width, level | (sign << (width - 1)));
      }
    }
  }
  return encoded;
}

void ReferenceDecodeAdd(const QsgdParams& params, const TensorLayout& layout,
                        const Encoded& encoded, float weight, std::vector<float>& acc) {
  const std::uint32_t s = params.levels;
  const std::uint32_t width = QsgdBitsPerCoordinate(s);
  std::size_t first_word = 0;
  std::size_t norm_index = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    for (std::size_t i = 0; i < layout.size(t); ++i) {
      const float norm = encoded.norms[norm_index + i / params.bucket];
      const float scale = weight * (norm / static_cast<float>(s));
      const std::uint32_t field = NaiveReadField(encoded.words, first_word, i, width);
      const std::uint32_t level = field & ((1u << (width - 1)) - 1u);
      const float magnitude = scale * static_cast<float>(level);
      float& a = acc[layout.offset(t) + i];
      a = a + ((field >> (width - 1)) != 0 ? -magnitude : magnitude);
    }
    first_word += QsgdCodec::WordsFor(layout.size(t), s);
    norm_index += QsgdCodec::BucketsFor(layout.size(t), params.bucket);
  }
}

std::vector<std::uint32_t> Bits(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = std::bit_cast<std::uint32_t>(values[i]);
  return bits;
}

// ---- Bit packing.

std::vector<std::uint32_t> RandomFields(std::size_t count, std::uint32_t width,
                                        std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::vector<std::uint32_t> fields(count);
  for (auto& f : fields) f = static_cast<std::uint32_t>(engine()) & internal::FieldMask(width);
  return fields;
}

TEST(QsgdBitPackingTest, RoundTripsEveryWidthAndCount) {
  const std::size_t counts[] = {0, 1, 2, 7, 31, 32, 33, 100, 127, 128, 129, 255, 256, 300, 1000};
  for (std::uint32_t width = 1; width <= 32; ++width) {
    for (const std::size_t count : counts) {
      SCOPED_TRACE(testing::Message() << "width " << width << " count " << count);
      const std::vector<std::uint32_t> fields = RandomFields(count, width, width * 1000u + 7u);
      const std::size_t word_count = internal::PackedWordCount(count, width);
      // One extra word of canary: PackFields must write exactly word_count words.
      std::vector<std::uint32_t> words(word_count + 1, 0xA5A5A5A5u);
      internal::PackFields(fields, width, words);
      EXPECT_EQ(words.back(), 0xA5A5A5A5u);
      words.pop_back();
      std::vector<std::uint32_t> naive(word_count, 0u);
      for (std::size_t i = 0; i < count; ++i) NaiveWriteField(naive, 0, i, width, fields[i]);
      ASSERT_EQ(words, naive);  // also: the unused bits of the last word are zero
      std::vector<std::uint32_t> unpacked(count, 0xFFFFFFFFu);
      internal::UnpackFields(words, width, unpacked);
      ASSERT_EQ(unpacked, fields);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(internal::ReadField(words, i, width), fields[i]);
      }
    }
  }
}

TEST(QsgdBitPackingTest, FieldsStraddleWordBoundaries) {
  // Width 3: field 10 occupies bits 30..32, i.e. two bits of word 0 and one of word 1.
  std::vector<std::uint32_t> fields(11, 0u);
  fields[10] = 0b101u;
  std::vector<std::uint32_t> words(2, 0u);
  internal::PackFields(fields, 3, words);
  EXPECT_EQ(words[0], 0b01u << 30);
  EXPECT_EQ(words[1], 0b1u);
  EXPECT_EQ(internal::ReadField(words, 10, 3), 0b101u);
  // Width 16 never straddles; width 5 does at fields 6 (bits 30..34) and 12 (bits 60..64).
  std::vector<std::uint32_t> five(13, 0u);
  five[6] = 0b11111u;
  five[12] = 0b10001u;
  std::vector<std::uint32_t> packed(internal::PackedWordCount(13, 5), 0u);
  internal::PackFields(five, 5, packed);
  EXPECT_EQ(packed[0], 0b11u << 30);
  EXPECT_EQ(packed[1], 0b111u | (0b0001u << 28));
  EXPECT_EQ(packed[2], 0b1u);
}

TEST(QsgdBitPackingTest, WriteFieldTouchesOnlyItsBits) {
  for (std::uint32_t width = 2; width <= 16; ++width) {
    std::vector<std::uint32_t> words(internal::PackedWordCount(70, width), 0xFFFFFFFFu);
    for (std::size_t i = 0; i < 70; ++i) {
      internal::WriteField(words, i, width, static_cast<std::uint32_t>(i * 7919u));
      ASSERT_EQ(internal::ReadField(words, i, width),
                static_cast<std::uint32_t>(i * 7919u) & internal::FieldMask(width));
      if (i + 1 < 70) {
        ASSERT_EQ(internal::ReadField(words, i + 1, width), internal::FieldMask(width))
            << "width " << width << " field " << i;
      }
    }
  }
}

TEST(QsgdBitPackingTest, MasksFieldsWiderThanTheirWidth) {
  const std::vector<std::uint32_t> fields = {0xFFFFFFFFu, 0u, 0xFFFFFFF0u};
  std::vector<std::uint32_t> words(1, 0u);
  internal::PackFields(fields, 4, words);
  EXPECT_EQ(words[0], 0xFu);  // fields 0xF, 0x0, 0x0
}

// ---- Parameters and shapes.

TEST(QsgdParamsTest, LevelsForBits) {
  EXPECT_EQ(QsgdLevelsForBits(0).status(), Status::InvalidArgument());
  EXPECT_EQ(QsgdLevelsForBits(1).status(), Status::InvalidArgument());
  EXPECT_EQ(QsgdLevelsForBits(17).status(), Status::InvalidArgument());
  EXPECT_EQ(QsgdLevelsForBits(2).value(), 1u);
  EXPECT_EQ(QsgdLevelsForBits(3).value(), 3u);
  EXPECT_EQ(QsgdLevelsForBits(8).value(), 127u);
  EXPECT_EQ(QsgdLevelsForBits(16).value(), 32767u);
  for (std::uint32_t bits = 2; bits <= 16; ++bits) {
    EXPECT_EQ(QsgdBitsPerCoordinate(QsgdLevelsForBits(bits).value()), bits);
  }
  EXPECT_EQ(QsgdBitsPerCoordinate(1), 2u);
  EXPECT_EQ(QsgdBitsPerCoordinate(2), 3u);
  EXPECT_EQ(QsgdBitsPerCoordinate(4), 4u);
  EXPECT_EQ(QsgdBitsPerCoordinate(100), 8u);
  EXPECT_EQ(QsgdBitsPerCoordinate(128), 9u);
}

TEST(QsgdParamsTest, RejectsBadParameters) {
  const TensorLayout layout = Layout({100});
  const std::vector<float> input(100, 1.0f);
  std::vector<std::uint32_t> words(1000);
  std::vector<float> norms(1000);
  std::vector<float> acc(100, 0.0f);
  const PayloadSpans out{{}, {}, words, norms};
  for (const QsgdParams& params :
       {QsgdParams{.levels = 0}, QsgdParams{.levels = kMaxQsgdLevels + 1},
        QsgdParams{.levels = 127, .bucket = 0}}) {
    EXPECT_EQ(QsgdCodec::Shape(params, layout).status(), Status::InvalidArgument());
    EXPECT_EQ(QsgdCodec::Encode(params, layout, CodecContext{}, input, out, {}),
              Status::InvalidArgument());
    EXPECT_EQ(QsgdCodec::DecodeAdd(params, layout, CodecContext{},
                                   PayloadView({}, {}, words, norms), 1.0f, acc, {}),
              Status::InvalidArgument());
    EXPECT_EQ(MaxEncodedBytes(params, layout), 0u);
  }
  EXPECT_EQ(QsgdCodec::Shape(QsgdParams{.levels = 1, .bucket = 1}, TensorLayout()).status(),
            Status::InvalidArgument());
}

TEST(QsgdParamsTest, RejectsWrongSizesAndSmallSpans) {
  const QsgdParams params{.levels = 127, .bucket = 10};
  const TensorLayout layout = Layout({100});
  const PayloadShape shape = QsgdCodec::Shape(params, layout).value();
  ASSERT_EQ(shape.words, 25u);
  ASSERT_EQ(shape.scales, 10u);
  const std::vector<float> input(100, 1.0f);
  std::vector<std::uint32_t> words(shape.words);
  std::vector<float> norms(shape.scales);
  const std::vector<float> short_input(99, 1.0f);
  EXPECT_EQ(QsgdCodec::Encode(params, layout, CodecContext{}, short_input,
                              PayloadSpans{{}, {}, words, norms}, {}),
            Status::InvalidArgument());
  EXPECT_EQ(QsgdCodec::Encode(params, layout, CodecContext{}, input,
                              PayloadSpans{{}, {}, std::span(words).first(24), norms}, {}),
            Status::ResourceExhausted());
  EXPECT_EQ(QsgdCodec::Encode(params, layout, CodecContext{}, input,
                              PayloadSpans{{}, {}, words, std::span(norms).first(9)}, {}),
            Status::ResourceExhausted());
  // Larger spans are fine: only the shape's prefix is written.
  std::vector<std::uint32_t> big_words(shape.words + 3, 0xCAFEu);
  std::vector<float> big_norms(shape.scales + 3, -1.0f);
  EXPECT_EQ(QsgdCodec::Encode(params, layout, CodecContext{}, input,
                              PayloadSpans{{}, {}, big_words, big_norms}, {}),
            Status::Ok());
  EXPECT_EQ(big_words.back(), 0xCAFEu);
  EXPECT_EQ(big_norms.back(), -1.0f);
  std::vector<float> short_acc(99, 0.0f);
  const Encoded encoded = Encode(params, layout, CodecContext{}, input);
  EXPECT_EQ(
      QsgdCodec::DecodeAdd(params, layout, CodecContext{}, encoded.View(), 1.0f, short_acc, {}),
      Status::InvalidArgument());
}

TEST(QsgdParamsTest, ShapeForBucketsThatDoNotDivideTheSize) {
  // Two tensors: 1000 coordinates at 3 bits (s = 3) = 3000 bits = 94 words (93.75), buckets of
  // 128 -> 8; 33 coordinates -> 99 bits = 4 words, 1 bucket.
  const PayloadShape shape =
      QsgdCodec::Shape(QsgdParams{.levels = 3, .bucket = 128}, Layout({1000, 33})).value();
  EXPECT_EQ(shape.words, 94u + 4u);
  EXPECT_EQ(shape.scales, 8u + 1u);
  EXPECT_EQ(shape.indices, 0u);
  EXPECT_EQ(shape.values, 0u);
  EXPECT_EQ(EncodedShape(QsgdParams{.levels = 3, .bucket = 128}, Layout({1000, 33})).value(),
            shape);
  EXPECT_EQ(MaxEncodedBytes(QsgdParams{.levels = 3, .bucket = 128}, Layout({1000, 33})),
            4u * (98u + 9u));
  static_assert(QsgdCodec::Shape(QsgdParams{}, TensorLayout::Single(1024).value()).value().words ==
                256);
}

// ---- Dither.

TEST(QsgdDitherTest, EveryKernelMatchesScalarPhilox) {
  const CodecContext contexts[] = {{0, 0, 0},
                                   {42, 7, 3},
                                   {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFu, 0x00FFFFFFu},
                                   {0x0123456789ABCDEFull, 1000, 0x00ABCDEFu}};
  const std::uint32_t first_blocks[] = {0, 32, 1u << 20, 0x3FFFFFE0u, 0xFFFFFFE0u};
  for (const QsgdKernel kernel : SupportedKernels()) {
    for (const CodecContext& context : contexts) {
      for (const std::uint32_t tensor : {0u, 1u, 63u}) {
        for (const std::uint32_t first : first_blocks) {
          std::array<std::uint32_t, internal::kQsgdDitherWords> words{};
          ASSERT_TRUE(internal::QsgdDitherWords(kernel, context, tensor, first, words));
          for (std::uint32_t b = 0; b < internal::kQsgdDitherWords / 4; ++b) {
            const PhiloxBlock expected = Philox4x32_10(
                {context.round, tensor,
                 StreamId(RandomPurpose::kQuantizationDither, context.worker), first + b},
                KeyFromSeed(context.seed));
            for (std::uint32_t w = 0; w < 4; ++w) {
              ASSERT_EQ(words[4 * b + w], expected[w])
                  << "kernel " << static_cast<int>(kernel) << " block " << first + b;
            }
          }
        }
      }
    }
  }
}

TEST(QsgdDitherTest, SameContextSameBytesOtherWorkerOtherBytes) {
  const QsgdParams params{.levels = 7, .bucket = 64};
  const TensorLayout layout = Layout({500, 77});
  const std::vector<float> input = GaussianVector(577, 1);
  const Encoded a = Encode(params, layout, CodecContext{9, 4, 1}, input);
  const Encoded b = Encode(params, layout, CodecContext{9, 4, 1}, input);
  EXPECT_EQ(a.words, b.words);
  EXPECT_EQ(Bits(a.norms), Bits(b.norms));
  for (const CodecContext& other :
       {CodecContext{9, 4, 2}, CodecContext{9, 5, 1}, CodecContext{10, 4, 1}}) {
    const Encoded c = Encode(params, layout, other, input);
    EXPECT_NE(a.words, c.words);
    EXPECT_EQ(Bits(a.norms), Bits(c.norms));  // norms do not depend on the dither
  }
  // Tensors draw from different streams: the same values in two tensors quantise differently.
  const std::vector<float> twice = [] {
    std::vector<float> x = GaussianVector(256, 2);
    x.insert(x.end(), x.begin(), x.end());
    return x;
  }();
  const Encoded two = Encode(params, Layout({256, 256}), CodecContext{1, 1, 1}, twice);
  ASSERT_EQ(two.words.size(), 64u);
  EXPECT_FALSE(std::equal(two.words.begin(), two.words.begin() + 32, two.words.begin() + 32));
}

// ---- Exact encoding and decoding against the reference.

TEST(QsgdEncodeTest, MatchesReferenceBitForBitOnEveryKernel) {
  struct Case {
    std::uint32_t levels;
    std::uint32_t bucket;
    std::vector<std::uint64_t> sizes;
  };
  const Case cases[] = {
      {1, 512, {1000}},        {1, 7, {129, 1, 300}},
      {3, 100, {1000, 33}},    {5, 64, {77, 130, 500}},
      {7, 3, {257}},           {100, 1000, {3000}},
      {127, 512, {4096, 100}}, {127, 1, {40}},
      {127, 33, {2048, 129}},  {2047, 128, {513, 1024}},
      {32767, 512, {1500, 2}}, {32767, 5000, {6000}},
      {255, 4096, {20000}},    {4, 4097, {4097 * 5 + 3}},
      {2, 8, {8 * 4 * 3 + 5}},
  };
  std::uint32_t seed = 100;
  for (const Case& c : cases) {
    const QsgdParams params{.levels = c.levels, .bucket = c.bucket};
    const TensorLayout layout = Layout(c.sizes);
    const std::vector<float> input = MixedInput(layout.dimension(), ++seed);
    const CodecContext context{seed * 77u, seed, seed % 5u};
    const Encoded expected = ReferenceEncode(params, layout, context, input);
    std::vector<float> expected_acc = GaussianVector(layout.dimension(), seed + 1000u);
    const std::vector<float> initial_acc = expected_acc;
    ReferenceDecodeAdd(params, layout, expected, 0.375f, expected_acc);
    for (const QsgdKernel kernel : SupportedKernels()) {
      SCOPED_TRACE(testing::Message() << "s " << c.levels << " bucket " << c.bucket << " kernel "
                                      << static_cast<int>(kernel));
      const Encoded actual = Encode(params, layout, context, input, kernel);
      ASSERT_EQ(actual.words, expected.words);
      ASSERT_EQ(Bits(actual.norms), Bits(expected.norms));
      std::vector<float> acc = initial_acc;
      ASSERT_EQ(internal::QsgdDecodeAddWith(kernel, params, layout, context, actual.View(), 0.375f,
                                            acc, {}),
                Status::Ok());
      ASSERT_EQ(Bits(acc), Bits(expected_acc));
    }
  }
}

TEST(QsgdEncodeTest, NormsMatchSumSquaresForEveryBucketSize) {
  // Batched norm computation must reproduce internal::SumSquares' lane order exactly.
  for (std::uint32_t bucket = 1; bucket <= 70; ++bucket) {
    const std::vector<float> input = MixedInput(bucket * 9u + 3u, bucket);
    const QsgdParams params{.levels = 15, .bucket = bucket};
    const Encoded encoded = Encode(params, Layout({input.size()}), CodecContext{}, input);
    for (std::size_t b = 0; b < encoded.norms.size(); ++b) {
      const std::size_t begin = b * bucket;
      const std::size_t length = std::min<std::size_t>(bucket, input.size() - begin);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(encoded.norms[b]),
                std::bit_cast<std::uint32_t>(
                    std::sqrt(internal::SumSquares({input.data() + begin, length}))))
          << "bucket " << bucket << " index " << b;
    }
  }
}

TEST(QsgdEncodeTest, LevelsAndWidthsForTypicalLevelCounts) {
  for (const std::uint32_t s : {1u, 3u, 127u, 32767u}) {
    const std::uint32_t width = QsgdBitsPerCoordinate(s);
    const QsgdParams params{.levels = s, .bucket = 100};  // 100 does not divide 1037 or 50
    const TensorLayout layout = Layout({1037, 50});
    const std::vector<float> input = GaussianVector(layout.dimension(), s);
    const Encoded encoded = Encode(params, layout, CodecContext{5, 6, 7}, input);
    std::size_t first_word = 0;
    std::uint32_t max_level = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      for (std::size_t i = 0; i < layout.size(t); ++i) {
        const std::uint32_t field = NaiveReadField(encoded.words, first_word, i, width);
        const std::uint32_t level = field & internal::FieldMask(width - 1);
        const float x = input[layout.offset(t) + i];
        ASSERT_LE(level, s);
        max_level = std::max(max_level, level);
        ASSERT_EQ(field >> (width - 1), std::signbit(x) ? 1u : 0u);
        // The level is floor or ceil of |x| s / norm.
        const float norm = encoded.norms[(t == 0 ? 0 : 11) + i / 100];
        const double ratio = std::fabs(static_cast<double>(x)) * s / static_cast<double>(norm);
        ASSERT_LE(std::fabs(level - ratio), 1.0 + 1e-3);
      }
      const std::size_t words = QsgdCodec::WordsFor(layout.size(t), s);
      const auto used = static_cast<std::uint32_t>(layout.size(t) * width % 32);
      if (used != 0) {
        EXPECT_EQ(encoded.words[first_word + words - 1] >> used, 0u);
      }
      first_word += words;
    }
    EXPECT_GE(max_level, s == 1 ? 1u : s / 8);  // the range is actually used
  }
}

TEST(QsgdEncodeTest, ZeroAndUnderflowingBucketsGetLevelZero) {
  const QsgdParams params{.levels = 127, .bucket = 4};
  // Bucket 0: zeros; bucket 1: squares underflow to 0; bucket 2: ordinary values.
  const std::vector<float> input = {0.0f,   -0.0f, 0.0f, 0.0f,  1e-30f, -1e-30f,
                                    2e-30f, 0.0f,  1.0f, -2.0f, 0.5f,   0.0f};
  const TensorLayout layout = Layout({input.size()});
  const Encoded encoded = Encode(params, layout, CodecContext{1, 2, 3}, input);
  EXPECT_EQ(encoded.norms[0], 0.0f);
  EXPECT_EQ(encoded.norms[1], 0.0f);
  EXPECT_GT(encoded.norms[2], 0.0f);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(internal::ReadField(encoded.words, i, 8) & 0x7Fu, 0u) << i;
  }
  const std::vector<float> decoded = Decode(params, layout, encoded);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(decoded[i], 0.0f);
  // The largest coordinate of a bucket has |x| s / norm close to s.
  EXPECT_NEAR(decoded[9], -2.0f, 2.3f / 127.0f * 1.01f);
}

TEST(QsgdEncodeTest, ASharedScaleQuantizesEveryBucketWithItOnEveryKernel) {
  const QsgdParams params{.levels = 7, .bucket = 16, .shared_scale = 1.5f};
  const TensorLayout layout = Layout({300, 45});
  const std::vector<float> input = GaussianVector(layout.dimension(), 21);  // some beyond 1.5
  const CodecContext context{9, 4, 2};
  const Encoded expected = Encode(params, layout, context, input, QsgdKernel::kPortable);
  for (const float norm : expected.norms) EXPECT_EQ(norm, 1.5f);
  const std::vector<float> decoded = Decode(params, layout, expected);
  std::size_t clipped = 0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const float ratio = std::min(std::fabs(input[i]) * (7.0f / 1.5f), 7.0f);
    const float level = std::fabs(decoded[i]) / (1.5f / 7.0f);
    ASSERT_TRUE(std::fabs(level - std::floor(ratio)) < 1e-4f ||
                std::fabs(level - std::ceil(ratio)) < 1e-4f)
        << i;
    clipped += std::fabs(input[i]) > 1.5f ? 1u : 0u;
    if (std::fabs(input[i]) > 1.5f) {
      EXPECT_FLOAT_EQ(std::fabs(decoded[i]), 1.5f) << i;
    }
  }
  EXPECT_GT(clipped, 0u);
  for (const QsgdKernel kernel : SupportedKernels()) {
    const Encoded actual = Encode(params, layout, context, input, kernel);
    EXPECT_EQ(actual.words, expected.words) << static_cast<int>(kernel);
    EXPECT_EQ(Bits(actual.norms), Bits(expected.norms));
  }
  // A payload of another scale is not one of this run's.
  Encoded other = expected;
  other.norms[3] = 1.25f;
  std::vector<float> acc(layout.dimension(), 0.0f);
  EXPECT_EQ(QsgdCodec::DecodeAdd(params, layout, context, other.View(), 1.0f, acc, {}).code(),
            StatusCode::kDataLoss);
  // The norms still vet the input.
  std::vector<float> bad = input;
  bad[17] = kNan;
  std::vector<std::uint32_t> words(expected.words.size());
  std::vector<float> norms(expected.norms.size());
  EXPECT_EQ(QsgdCodec::Encode(params, layout, context, bad, PayloadSpans{{}, {}, words, norms}, {})
                .code(),
            StatusCode::kInvalidArgument);
  for (const float scale : {-1.0f, kNan, kInf, 1e-38f, 1e-44f}) {
    EXPECT_FALSE(QsgdCodec::Validate({.shared_scale = scale}).ok()) << scale;
  }
  EXPECT_TRUE(QsgdCodec::Validate({.levels = kMaxQsgdLevels, .shared_scale = kMinQsgdSharedScale})
                  .ok());
  // At the smallest scale a zero coordinate still quantises to level 0.
  const QsgdParams tiny{.levels = kMaxQsgdLevels, .bucket = 16, .shared_scale = kMinQsgdSharedScale};
  std::vector<float> zeros(input.size(), 0.0f);
  zeros[3] = 1.0f;
  const std::vector<float> tiny_decoded =
      Decode(tiny, layout, Encode(tiny, layout, context, zeros, QsgdKernel::kPortable));
  for (std::size_t i = 0; i < zeros.size(); ++i) {
    ASSERT_EQ(tiny_decoded[i], i == 3 ? kMinQsgdSharedScale : 0.0f) << i;
  }
}

TEST(QsgdEncodeTest, RejectsNonFiniteInput) {
  const QsgdParams params{.levels = 127, .bucket = 16};
  const TensorLayout layout = Layout({100});
  for (const float bad : {kNan, kInf, -kInf, 3e19f}) {
    for (const std::size_t where : {0u, 50u, 99u}) {
      std::vector<float> input = GaussianVector(100, 3);
      input[where] = bad;
      std::vector<std::uint32_t> words(25);
      std::vector<float> norms(7);
      for (const QsgdKernel kernel : SupportedKernels()) {
        EXPECT_EQ(internal::QsgdEncodeWith(kernel, params, layout, CodecContext{}, input,
                                           PayloadSpans{{}, {}, words, norms}, {}),
                  Status::InvalidArgument());
      }
    }
  }
}

TEST(QsgdEncodeTest, HighResolutionRoundTripIsClose) {
  const QsgdParams params{.levels = 32767, .bucket = 256};
  const TensorLayout layout = Layout({3000, 10});
  const std::vector<float> input = GaussianVector(layout.dimension(), 11);
  const Encoded encoded = Encode(params, layout, CodecContext{3, 3, 3}, input);
  const std::vector<float> decoded = Decode(params, layout, encoded);
  for (std::size_t i = 0; i < input.size(); ++i) {
    const float norm = encoded.norms[i < 3000 ? i / 256 : 12];
    ASSERT_NEAR(decoded[i], input[i], norm / 32767.0f * 1.001f) << i;
  }
}

TEST(QsgdEncodeTest, DecodeAddAccumulatesWithWeight) {
  const QsgdParams params{.levels = 3, .bucket = 32};
  const TensorLayout layout = Layout({100, 60});
  const std::vector<float> input = GaussianVector(160, 4);
  const Encoded encoded = Encode(params, layout, CodecContext{1, 1, 1}, input);
  const std::vector<float> once = Decode(params, layout, encoded, 1.0f);
  std::vector<float> acc(160, 1.0f);
  ASSERT_EQ(QsgdCodec::DecodeAdd(params, layout, CodecContext{}, encoded.View(), -0.5f, acc, {}),
            Status::Ok());
  for (std::size_t i = 0; i < 160; ++i) EXPECT_FLOAT_EQ(acc[i], 1.0f - 0.5f * once[i]);
}

TEST(QsgdEncodeTest, WorksThroughTheRegistry) {
  const QsgdParams params{.levels = 15, .bucket = 50};
  const TensorLayout layout = Layout({333});
  const std::vector<float> input = GaussianVector(333, 5);
  const PayloadShape shape = EncodedShape(params, layout).value();
  std::vector<std::uint32_t> words(shape.words);
  std::vector<float> norms(shape.scales);
  const PayloadSpans out{{}, {}, words, norms};
  ASSERT_EQ(AllCodecs().Encode(params, layout, CodecContext{8, 8, 8}, input, out, {}),
            Status::Ok());
  const Encoded expected = ReferenceEncode(params, layout, CodecContext{8, 8, 8}, input);
  EXPECT_EQ(words, expected.words);
  std::vector<float> acc(333, 0.0f);
  ASSERT_EQ(
      AllCodecs().DecodeAdd(params, layout, CodecContext{}, PayloadView(out, shape), 1.0f, acc, {}),
      Status::Ok());
  EXPECT_EQ(CodecScratchBytes(params, layout), 0u);
}

// ---- Statistics: unbiased, and the variance bound.

TEST(QsgdStatisticsTest, DecodedMeanIsUnbiased) {
  for (const std::uint32_t s : {1u, 3u}) {
    const QsgdParams params{.levels = s, .bucket = 64};
    const TensorLayout layout = Layout({150, 70});
    const std::vector<float> input = GaussianVector(layout.dimension(), 21 + s);
    constexpr int kTrials = 4000;
    std::vector<double> sum(input.size(), 0.0);
    std::vector<float> norms;
    for (int trial = 0; trial < kTrials; ++trial) {
      const CodecContext context{1234, static_cast<std::uint32_t>(trial / 8),
                                 static_cast<std::uint32_t>(trial % 8)};
      const Encoded encoded = Encode(params, layout, context, input);
      norms = encoded.norms;
      const std::vector<float> decoded = Decode(params, layout, encoded);
      for (std::size_t i = 0; i < input.size(); ++i) sum[i] += static_cast<double>(decoded[i]);
    }
    for (std::size_t i = 0; i < input.size(); ++i) {
      const std::size_t bucket = i < 150 ? i / 64 : 3 + (i - 150) / 64;
      // Each decoded value lies in an interval of width norm / s around x; by Hoeffding the
      // mean of kTrials draws is within 6 of these half-widths / sqrt(kTrials) except with
      // probability 2 exp(-18) per coordinate.
      const double step = static_cast<double>(norms[bucket]) / s;
      const double bound = 6.0 * step / (2.0 * std::sqrt(static_cast<double>(kTrials)));
      ASSERT_NEAR(sum[i] / kTrials, static_cast<double>(input[i]), bound + 1e-6)
          << "s " << s << " coordinate " << i;
    }
  }
}

TEST(QsgdStatisticsTest, VarianceWithinTheQsgdBound) {
  struct Case {
    std::uint32_t levels;
    std::uint32_t bucket;
    bool flat;  // all magnitudes equal: close to the worst case of the sqrt(B)/s bound
  };
  for (const Case c : {Case{1, 64, true}, Case{1, 64, false}, Case{2, 256, true},
                       Case{15, 16, false}, Case{127, 512, false}}) {
    const QsgdParams params{.levels = c.levels, .bucket = c.bucket};
    const std::size_t size = 4 * c.bucket;
    const TensorLayout layout = Layout({size});
    std::vector<float> input = GaussianVector(size, c.levels + c.bucket);
    if (c.flat) {
      for (float& v : input) v = v < 0.0f ? -0.25f : 0.25f;
    }
    double norm_squared = 0.0;
    for (const float v : input) norm_squared += static_cast<double>(v) * static_cast<double>(v);
    constexpr int kTrials = 400;
    double error_squared = 0.0;
    for (int trial = 0; trial < kTrials; ++trial) {
      const Encoded encoded =
          Encode(params, layout, CodecContext{77, static_cast<std::uint32_t>(trial), 0}, input);
      const std::vector<float> decoded = Decode(params, layout, encoded);
      for (std::size_t i = 0; i < size; ++i) {
        const double e = static_cast<double>(decoded[i]) - static_cast<double>(input[i]);
        error_squared += e * e;
      }
    }
    const double variance = error_squared / kTrials;
    const double b = c.bucket;
    const double s = c.levels;
    const double bound = std::min(b / (s * s), std::sqrt(b) / s) * norm_squared;
    EXPECT_LE(variance, bound) << "s " << c.levels << " B " << c.bucket;
    if (c.flat) {
      // Flat input with s < sqrt(B): every ratio is s / sqrt(B) < 1, so the expected squared
      // error is B (norm / s)^2 r (1 - r) = (sqrt(B) / s - 1) ||v||^2, close to the bound.
      const double expected = (std::sqrt(b) / s - 1.0) * norm_squared;
      EXPECT_NEAR(variance, expected, 0.05 * expected);
    }
  }
}

// ---- Malformed payloads.

class QsgdMalformedTest : public testing::Test {
 protected:
  // s = 5 (4-bit fields, levels 6 and 7 representable but invalid); sizes leave padding.
  const QsgdParams params_{.levels = 5, .bucket = 16};
  const TensorLayout layout_ = Layout({37, 20});
  const std::vector<float> input_ = GaussianVector(57, 8);
  const Encoded good_ = Encode(params_, layout_, CodecContext{1, 2, 3}, input_);

  // Every kernel rejects `payload` with kDataLoss and leaves the accumulator bit-identical.
  void ExpectRejected(const PayloadView& payload) {
    for (const QsgdKernel kernel : SupportedKernels()) {
      std::vector<float> acc = GaussianVector(57, 9);
      const std::vector<std::uint32_t> before = Bits(acc);
      EXPECT_EQ(internal::QsgdDecodeAddWith(kernel, params_, layout_, CodecContext{}, payload, 1.0f,
                                            acc, {}),
                Status::DataLoss())
          << "kernel " << static_cast<int>(kernel);
      EXPECT_EQ(Bits(acc), before);
    }
  }
};

TEST_F(QsgdMalformedTest, GoodPayloadDecodes) {
  std::vector<float> acc(57, 0.0f);
  EXPECT_EQ(QsgdCodec::DecodeAdd(params_, layout_, CodecContext{}, good_.View(), 1.0f, acc, {}),
            Status::Ok());
}

TEST_F(QsgdMalformedTest, RejectsLevelsAboveS) {
  // Tensor 0: 37 fields of 4 bits = 148 bits = 5 words; tensor 1 starts at word 5.
  for (const std::size_t field : {0u, 7u, 8u, 36u}) {
    for (const std::uint32_t level : {6u, 7u}) {
      Encoded bad = good_;
      internal::WriteField(bad.words, field, 4, level | 8u);  // negative sign too
      ExpectRejected(bad.View());
    }
  }
  Encoded bad = good_;
  internal::WriteField(std::span(bad.words).subspan(5), 19, 4, 6u);  // last field of tensor 1
  ExpectRejected(bad.View());
  // Level s itself is fine.
  Encoded edge = good_;
  internal::WriteField(edge.words, 3, 4, 5u);
  std::vector<float> acc(57, 0.0f);
  EXPECT_EQ(QsgdCodec::DecodeAdd(params_, layout_, CodecContext{}, edge.View(), 1.0f, acc, {}),
            Status::Ok());
}

TEST_F(QsgdMalformedTest, RejectsNonZeroPadding) {
  // Tensor 0 uses 148 bits: bits 20..31 of word 4 are padding; tensor 1 uses 80 bits: bits
  // 16..31 of word 7.
  const std::pair<std::size_t, int> padding_bits[] = {{4, 20}, {4, 31}, {7, 16}, {7, 31}};
  for (const auto& [word, bit] : padding_bits) {
    Encoded bad = good_;
    bad.words[word] |= 1u << bit;
    ExpectRejected(bad.View());
  }
}

TEST_F(QsgdMalformedTest, RejectsBadNorms) {
  for (const float norm : {kNan, kInf, -kInf, -1.0f, -1e-30f}) {
    for (const std::size_t index : {0u, 2u, 4u}) {
      Encoded bad = good_;
      bad.norms[index] = norm;
      ExpectRejected(bad.View());
    }
  }
  // -0.0 is a valid (zero) norm.
  Encoded zero = good_;
  zero.norms[1] = -0.0f;
  std::vector<float> acc(57, 0.0f);
  EXPECT_EQ(QsgdCodec::DecodeAdd(params_, layout_, CodecContext{}, zero.View(), 1.0f, acc, {}),
            Status::Ok());
}

TEST_F(QsgdMalformedTest, RejectsWrongFieldSizes) {
  const std::span<const std::uint32_t> words = good_.words;
  const std::span<const float> norms = good_.norms;
  std::vector<std::uint32_t> long_words = good_.words;
  long_words.push_back(0);
  std::vector<float> long_norms = good_.norms;
  long_norms.push_back(1.0f);
  const std::vector<std::uint32_t> indices = {0};
  const std::vector<float> values = {1.0f};
  ExpectRejected(PayloadView({}, {}, words.first(words.size() - 1), norms));
  ExpectRejected(PayloadView({}, {}, long_words, norms));
  ExpectRejected(PayloadView({}, {}, words, norms.first(norms.size() - 1)));
  ExpectRejected(PayloadView({}, {}, words, long_norms));
  ExpectRejected(PayloadView(indices, {}, words, norms));
  ExpectRejected(PayloadView({}, values, words, norms));
  ExpectRejected(PayloadView({}, {}, {}, {}));
}

TEST(QsgdMalformedFullRangeTest, AllFieldValuesValidWhenSIsAllOnes) {
  // s = 7 fills its 3 level bits: any level field is valid, only padding and norms can be bad.
  const QsgdParams params{.levels = 7, .bucket = 10};
  const TensorLayout layout = Layout({30});
  Encoded encoded;
  encoded.words.assign(QsgdCodec::WordsFor(30, 7), 0xFFFFFFFFu);
  encoded.words.back() &= internal::FieldMask(30 * 4 % 32);
  encoded.norms.assign(3, 1.0f);
  std::vector<float> acc(30, 0.0f);
  ASSERT_EQ(QsgdCodec::DecodeAdd(params, layout, CodecContext{}, encoded.View(), 1.0f, acc, {}),
            Status::Ok());
  for (const float v : acc) EXPECT_FLOAT_EQ(v, -1.0f);
}

}  // namespace
}  // namespace edgesgd
