#include "edgesgd/core/codecs/top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "edgesgd/core/internal/top_k_select.h"

namespace edgesgd {
namespace {

using internal::SelectTopKeys;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::uint32_t KeyOf(float v) { return std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu; }

// The reference: a full sort by (key descending, index ascending), first k, ascending indices.
std::vector<std::uint32_t> SortTopK(const std::vector<float>& x, std::size_t k,
                                    std::uint32_t base = 0) {
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  const auto before = [&x](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t ka = KeyOf(x[a]);
    const std::uint32_t kb = KeyOf(x[b]);
    return ka != kb ? ka > kb : a < b;
  };
  // A strict total order, so partitioning then sorting the head equals a full sort's head.
  if (k > 0 && k < x.size()) {
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(),
                     before);
  }
  order.resize(k);
  std::sort(order.begin(), order.end(), before);
  std::sort(order.begin(), order.end());
  for (auto& i : order) i += base;
  return order;
}

struct Selection {
  Status status;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};

Selection Select(const std::vector<float>& x, std::size_t k, std::size_t scratch_bytes,
                 std::uint32_t base = 0, std::size_t misalign = 0) {
  Selection result;
  result.indices.assign(k, 0xDEADBEEFu);
  result.values.assign(k, -1234.5f);
  std::vector<std::byte> scratch(scratch_bytes + misalign);
  result.status = SelectTopKeys(x, k, result.indices, result.values,
                                std::span<std::byte>(scratch).subspan(misalign), base);
  return result;
}

// Checks SelectTopKeys against the sort with the recommended, the least and a few capacities
// around k (where the one-pass path starts or stops fitting).
void ExpectMatchesSort(const std::vector<float>& x, std::size_t k, const char* what) {
  SCOPED_TRACE(testing::Message() << what << " size=" << x.size() << " k=" << k);
  const std::vector<std::uint32_t> expected = SortTopK(x, k);
  std::vector<std::size_t> scratch_sizes = {
      internal::TopKeysScratchBytes(x.size(), k), internal::kTopKeysMinScratchBytes,
      internal::TopKeysScratchBytesForCapacity(k), internal::TopKeysScratchBytesForCapacity(k + 1),
      internal::TopKeysScratchBytesForCapacity(2 * k + 3)};
  if (k > 0) scratch_sizes.push_back(internal::TopKeysScratchBytesForCapacity(k - 1));
  for (const std::size_t bytes : scratch_sizes) {
    SCOPED_TRACE(testing::Message() << "scratch=" << bytes);
    const Selection got = Select(x, k, bytes);
    ASSERT_TRUE(got.status.ok()) << got.status.str();
    ASSERT_EQ(got.indices, expected);
    for (std::size_t j = 0; j < k; ++j) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got.values[j]),
                std::bit_cast<std::uint32_t>(x[got.indices[j]]));
    }
  }
}

std::vector<float> Normal(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Small integers: many ties, zeros, both signs.
std::vector<float> SmallIntegers(std::size_t n, std::uint32_t seed, int range) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-range, range);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(dist(rng));
  return x;
}

std::size_t KFor(std::size_t n, double ratio) {
  auto k = static_cast<std::size_t>(static_cast<double>(n) * ratio + 0.5);
  return std::clamp<std::size_t>(k, 1, n);
}

TEST(TopKSelect, MatchesSortOverSeedsSizesAndRatios) {
  const std::size_t sizes[] = {1, 2, 3, 15, 16, 17, 31, 100, 1000, 1023, 1024, 1025, 5000, 20000};
  const double ratios[] = {0.0, 0.001, 0.01, 0.05, 0.3, 0.5, 0.99, 1.0};
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    for (const std::size_t n : sizes) {
      for (const double ratio : ratios) {
        const std::size_t k = ratio == 0.0 ? 1 : KFor(n, ratio);
        ExpectMatchesSort(Normal(n, seed), k, "normal");
        ExpectMatchesSort(SmallIntegers(n, seed, 3), k, "small integers");
      }
    }
  }
}

// Inputs large enough for the sampled one-pass path, across seeds, ratios and distributions.
TEST(TopKSelect, MatchesSortOnLargeInputs) {
  const std::size_t n = 150007;  // not a multiple of the 16-key blocks
  for (std::uint32_t seed = 11; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    std::vector<float> uniform(n);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& v : uniform) v = dist(rng);
    std::vector<float> heavy_tail(n);
    std::cauchy_distribution<float> cauchy;
    for (auto& v : heavy_tail) v = cauchy(rng);
    for (const double ratio : {0.0001, 0.01, 0.1, 0.4}) {
      const std::size_t k = KFor(n, ratio);
      ExpectMatchesSort(Normal(n, seed), k, "normal");
      ExpectMatchesSort(uniform, k, "uniform");
      ExpectMatchesSort(heavy_tail, k, "cauchy");
      ExpectMatchesSort(SmallIntegers(n, seed, 1000), k, "integers");
    }
  }
}

TEST(TopKSelect, AdversarialInputs) {
  for (const std::size_t n : {1u, 7u, 64u, 5000u, 100003u}) {
    std::vector<std::vector<float>> inputs;
    inputs.emplace_back(n, 0.0f);   // all zeros
    inputs.emplace_back(n, -3.5f);  // all equal, negative
    std::vector<float> ascending(n);
    for (std::size_t i = 0; i < n; ++i) ascending[i] = static_cast<float>(i) * 0.25f;
    inputs.push_back(ascending);
    inputs.emplace_back(ascending.rbegin(), ascending.rend());
    std::vector<float> negative_ascending(ascending);
    for (auto& v : negative_ascending) v = -v;
    inputs.push_back(negative_ascending);
    // Alternating signs of equal magnitude: ties between x and -x.
    std::vector<float> alternating(n);
    for (std::size_t i = 0; i < n; ++i) alternating[i] = (i % 2 == 0 ? 1.0f : -1.0f) * 2.0f;
    inputs.push_back(alternating);
    // Mostly zeros (signed) with a few large values and infinities.
    std::vector<float> sparse(n, 0.0f);
    for (std::size_t i = 0; i < n; i += 3) sparse[i] = -0.0f;
    for (std::size_t i = 0; i < n; i += 97) sparse[i] = static_cast<float>(i % 7) - 3.0f;
    sparse[n / 2] = kInf;
    sparse[n - 1] = -kInf;
    inputs.push_back(sparse);
    // Denormals next to normals; the largest finite floats.
    std::vector<float> extremes = Normal(n, 5);
    for (std::size_t i = 0; i < n; i += 5) extremes[i] = std::numeric_limits<float>::denorm_min();
    for (std::size_t i = 2; i < n; i += 11) extremes[i] = -std::numeric_limits<float>::max();
    inputs.push_back(extremes);
    for (const auto& x : inputs) {
      for (const std::size_t k : {std::size_t{1}, std::size_t{2}, n / 3, n / 2, n - 1, n}) {
        if (k == 0 || k > n) continue;
        ExpectMatchesSort(x, k, "adversarial");
      }
    }
  }
}

// O(n) exactness check: ascending distinct indices, and the weakest selected coordinate ranks
// before the strongest unselected one in (key descending, index ascending) order.
bool IsExactTopK(const std::vector<float>& x, std::size_t k,
                 const std::vector<std::uint32_t>& indices) {
  if (indices.size() != k) return false;
  std::vector<bool> selected(x.size(), false);
  for (std::size_t j = 0; j < k; ++j) {
    if (indices[j] >= x.size() || (j > 0 && indices[j] <= indices[j - 1])) return false;
    selected[indices[j]] = true;
  }
  const auto before = [&x](std::size_t a, std::size_t b) {
    return KeyOf(x[a]) != KeyOf(x[b]) ? KeyOf(x[a]) > KeyOf(x[b]) : a < b;
  };
  std::size_t weakest_in = x.size();
  std::size_t strongest_out = x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (selected[i]) {
      if (weakest_in == x.size() || before(weakest_in, i)) weakest_in = i;
    } else if (strongest_out == x.size() || before(i, strongest_out)) {
      strongest_out = i;
    }
  }
  return weakest_in == x.size() || strongest_out == x.size() || before(weakest_in, strongest_out);
}

// Periodic spikes whose period matches (or nearly matches) the sampling stride fool the
// threshold guess both ways: too high (too few candidates) or too low (overflow). The result
// must stay exact through the fallback.
TEST(TopKSelect, PeriodicInputsThatMisleadTheSample) {
  const std::size_t n = std::size_t{1} << 18;
  const std::size_t k = n / 100;
  std::vector<std::byte> scratch(internal::TopKeysScratchBytes(n, k));
  std::vector<std::uint32_t> indices(k);
  std::vector<float> noise(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : noise) v = dist(rng);
  std::vector<float> x(n);
  // Around the stride of the current sampling geometry for this size (619); other periods
  // still check exactness.
  for (std::size_t period = 600; period <= 640; ++period) {
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = (i % period < 16 ? 100.0f : 0.0f) + noise[i];
    }
    ASSERT_TRUE(SelectTopKeys(x, k, indices, scratch).ok());
    ASSERT_TRUE(IsExactTopK(x, k, indices)) << "period " << period;
    // Spikes everywhere except where the sample looks: the guess is too low.
    for (std::size_t i = 0; i < n; ++i) x[i] = 100.0f - x[i];
    ASSERT_TRUE(SelectTopKeys(x, k, indices, scratch).ok());
    ASSERT_TRUE(IsExactTopK(x, k, indices)) << "inverted period " << period;
  }
}

TEST(TopKSelect, NaNRanksAboveInfinityByBits) {
  std::vector<float> x = {1.0f, kInf, -kInf, kNaN, 2.0f, -kNaN, 0.0f, 3.0f};
  const float big_nan = std::bit_cast<float>(0x7FFFFFFFu);
  x.push_back(big_nan);
  // Keys: NaN 0x7FC00000 (twice, index 3 and 5), 0x7FFFFFFF (index 8), inf (1, 2).
  EXPECT_EQ(SortTopK(x, 1), (std::vector<std::uint32_t>{8}));
  EXPECT_EQ(SortTopK(x, 3), (std::vector<std::uint32_t>{3, 5, 8}));
  for (std::size_t k = 1; k <= x.size(); ++k) ExpectMatchesSort(x, k, "nan");
  const Selection got = Select(x, 4, internal::TopKeysScratchBytes(x.size(), 4));
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.indices, (std::vector<std::uint32_t>{1, 3, 5, 8}));
  // Values are passed through bit for bit (sign of -NaN included).
  EXPECT_EQ(std::bit_cast<std::uint32_t>(got.values[2]), std::bit_cast<std::uint32_t>(-kNaN));

  // A large input with NaNs and infinities scattered: the sampled path must order them too.
  std::vector<float> large = Normal(100000, 3);
  for (std::size_t i = 17; i < large.size(); i += 1009) large[i] = kNaN;
  for (std::size_t i = 29; i < large.size(); i += 1013) large[i] = -kInf;
  for (const std::size_t k : {50u, 99u, 100u, 101u, 150u, 1000u}) {
    ExpectMatchesSort(large, k, "nan large");
  }
}

// Ties straddling the cut are resolved by lower index, including among candidates that were
// collected by the one-pass path.
TEST(TopKSelect, TiesResolvedByLowerIndex) {
  const std::size_t n = 100000;
  std::vector<float> x = Normal(n, 9);
  for (auto& v : x) v = std::round(v * 8.0f) / 8.0f;  // few distinct magnitudes
  for (const std::size_t k : {1u, 10u, 999u, 1000u, 1001u, 5000u, 33333u}) {
    ExpectMatchesSort(x, k, "rounded normal");
  }
  std::vector<float> two_levels(n, 1.0f);
  for (std::size_t i = 0; i < n; i += 10) two_levels[i] = -2.0f;
  for (const std::size_t k : {9999u, 10000u, 10001u, 20000u}) {
    ExpectMatchesSort(two_levels, k, "two levels");
  }
}

TEST(TopKSelect, IndexBaseAndMisalignedScratch) {
  const std::vector<float> x = Normal(50000, 21);
  const std::size_t k = 500;
  const std::uint32_t base = 123456;
  const std::vector<std::uint32_t> expected = SortTopK(x, k, base);
  for (std::size_t misalign = 0; misalign < 4; ++misalign) {
    const Selection got = Select(x, k, internal::TopKeysScratchBytes(x.size(), k), base, misalign);
    ASSERT_TRUE(got.status.ok());
    EXPECT_EQ(got.indices, expected);
  }
  // Indices only.
  std::vector<std::uint32_t> indices(k);
  std::vector<std::byte> scratch(internal::TopKeysScratchBytes(x.size(), k));
  ASSERT_TRUE(SelectTopKeys(x, k, indices, scratch, base).ok());
  EXPECT_EQ(indices, expected);
  // The largest base that still fits 32-bit positions.
  const std::vector<float> three = {1.0f, 3.0f, 2.0f};
  const Selection top = Select(three, 1, internal::kTopKeysMinScratchBytes, 0xFFFFFFFDu);
  ASSERT_TRUE(top.status.ok());
  EXPECT_EQ(top.indices, (std::vector<std::uint32_t>{0xFFFFFFFEu}));
}

TEST(TopKSelect, BadArguments) {
  const std::vector<float> x = Normal(100, 1);
  std::vector<std::uint32_t> indices(10);
  std::vector<float> values(10);
  std::vector<std::byte> scratch(internal::TopKeysScratchBytes(100, 10));
  EXPECT_EQ(SelectTopKeys(x, 101, indices, scratch), Status::InvalidArgument());
  EXPECT_EQ(SelectTopKeys(x, 11, indices, scratch), Status::ResourceExhausted());
  EXPECT_EQ(SelectTopKeys(x, 10, indices, std::span<float>(values).first(9), scratch),
            Status::ResourceExhausted());
  EXPECT_EQ(
      SelectTopKeys(x, 10, indices,
                    std::span<std::byte>(scratch).first(internal::kTopKeysMinScratchBytes - 4)),
      Status::ResourceExhausted());
  EXPECT_EQ(SelectTopKeys(x, 10, indices, std::span<std::byte>()), Status::ResourceExhausted());
  EXPECT_EQ(SelectTopKeys(x, 10, indices, scratch, 0xFFFFFFFFu - 98), Status::InvalidArgument());
  EXPECT_TRUE(SelectTopKeys(x, 10, indices, scratch, 0xFFFFFFFFu - 99).ok());
  EXPECT_TRUE(SelectTopKeys(x, 0, std::span<std::uint32_t>(), scratch).ok());
  EXPECT_TRUE(SelectTopKeys(std::span<const float>(), 0, std::span<std::uint32_t>(), scratch).ok());
}

// ----------------------------------------------------------------------------------------------
// The codec.

TensorLayout Layout(std::vector<std::uint64_t> sizes) {
  return TensorLayout::FromSizes(sizes).value();
}

struct Encoded {
  Status status;
  PayloadShape shape;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};

Encoded EncodeTopK(const TopKParams& params, const TensorLayout& layout,
                   const std::vector<float>& x) {
  Encoded encoded;
  encoded.shape = TopKCodec::Shape(params, layout).value();
  encoded.indices.resize(encoded.shape.indices);
  encoded.values.resize(encoded.shape.values);
  std::vector<std::byte> scratch(TopKCodec::ScratchBytes(params, layout));
  const PayloadSpans out{encoded.indices, encoded.values, {}, {}};
  encoded.status = TopKCodec::Encode(params, layout, CodecContext{}, x, out, scratch);
  return encoded;
}

// Per tensor: the sort's choice among that tensor's coordinates, as global positions.
std::vector<std::uint32_t> SortTopKPerTensor(const TopKParams& params, const TensorLayout& layout,
                                             const std::vector<float>& x) {
  std::vector<std::uint32_t> all;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::vector<float> slice(
        x.begin() + static_cast<std::ptrdiff_t>(layout.offset(t)),
        x.begin() + static_cast<std::ptrdiff_t>(layout.offset(t) + layout.size(t)));
    const std::size_t k = SparseCount(layout.size(t), params.k_ratio).value();
    const auto part = SortTopK(slice, k, static_cast<std::uint32_t>(layout.offset(t)));
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

TEST(TopKCodec, ShapeAndScratchAreConstexpr) {
  constexpr TopKParams kParams{.k_ratio = 0.01f};
  constexpr TensorLayout kLayout = TensorLayout::Single(100000).value();
  static_assert(TopKCodec::Shape(kParams, kLayout).value().indices == 1000);
  static_assert(TopKCodec::Shape(kParams, kLayout).value().bytes() == 8000);
  static_assert(TopKCodec::ScratchBytes(kParams, kLayout) ==
                internal::TopKeysScratchBytes(100000, 1000));
  SUCCEED();
}

TEST(TopKCodec, EncodeMatchesSortPerTensor) {
  const std::vector<std::vector<std::uint64_t>> layouts = {
      {1}, {10}, {100000}, {1, 1, 1}, {5, 1000, 17, 40000, 3}, {65536, 1, 70000}};
  for (const auto& sizes : layouts) {
    const TensorLayout layout = Layout(sizes);
    for (const float ratio : {1e-5f, 0.001f, 0.01f, 0.1f, 0.5f, 1.0f}) {
      for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(testing::Message()
                     << "tensors=" << sizes.size() << " dim=" << layout.dimension()
                     << " ratio=" << ratio << " seed=" << seed);
        const TopKParams params{.k_ratio = ratio};
        std::vector<float> x = Normal(layout.dimension(), seed);
        if (seed == 3) {
          for (auto& v : x) v = std::round(v * 2.0f);  // ties and zeros
        }
        const Encoded encoded = EncodeTopK(params, layout, x);
        ASSERT_TRUE(encoded.status.ok()) << encoded.status.str();
        ASSERT_EQ(encoded.indices, SortTopKPerTensor(params, layout, x));
        ASSERT_TRUE(std::is_sorted(encoded.indices.begin(), encoded.indices.end()));
        for (std::size_t j = 0; j < encoded.indices.size(); ++j) {
          ASSERT_EQ(encoded.values[j], x[encoded.indices[j]]);
        }
      }
    }
  }
}

TEST(TopKCodec, RoundTripAddsWeightedValues) {
  const TensorLayout layout = Layout({300, 7, 20000});
  const TopKParams params{.k_ratio = 0.05f};
  const std::vector<float> x = Normal(layout.dimension(), 4);
  const Encoded encoded = EncodeTopK(params, layout, x);
  ASSERT_TRUE(encoded.status.ok());

  std::vector<float> accumulator(layout.dimension(), 1.0f);
  const PayloadView view(encoded.indices, encoded.values, {}, {});
  ASSERT_TRUE(
      TopKCodec::DecodeAdd(params, layout, CodecContext{}, view, 0.5f, accumulator, {}).ok());
  std::vector<bool> sent(layout.dimension(), false);
  for (const std::uint32_t i : encoded.indices) sent[i] = true;
  for (std::size_t i = 0; i < accumulator.size(); ++i) {
    const float expected = sent[i] ? 1.0f + 0.5f * x[i] : 1.0f;
    ASSERT_EQ(accumulator[i], expected) << i;
  }

  // Sent part + residual == input, exactly (error feedback relies on it).
  std::vector<float> decoded(layout.dimension(), 0.0f);
  ASSERT_TRUE(TopKCodec::DecodeAdd(params, layout, CodecContext{}, view, 1.0f, decoded, {}).ok());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(decoded[i], sent[i] ? x[i] : 0.0f);
  }
}

class TopKMalformedPayload : public testing::Test {
 protected:
  TopKMalformedPayload() : layout_(Layout({100, 50, 200})), params_(TopKParams{.k_ratio = 0.1f}) {
    x_ = Normal(layout_.dimension(), 8);
    encoded_ = EncodeTopK(params_, layout_, x_);
    accumulator_ = Normal(layout_.dimension(), 99);
  }

  // Decodes `indices`/`values` and checks kDataLoss with the accumulator untouched.
  void ExpectRejected(const std::vector<std::uint32_t>& indices, const std::vector<float>& values) {
    std::vector<float> accumulator = accumulator_;
    const PayloadView view(indices, values, {}, {});
    EXPECT_EQ(TopKCodec::DecodeAdd(params_, layout_, CodecContext{}, view, 1.0f, accumulator, {}),
              Status::DataLoss());
    EXPECT_EQ(0, std::memcmp(accumulator.data(), accumulator_.data(),
                             accumulator.size() * sizeof(float)));
  }

  TensorLayout layout_;
  TopKParams params_;
  std::vector<float> x_;
  Encoded encoded_;
  std::vector<float> accumulator_;
};

TEST_F(TopKMalformedPayload, WellFormedIsAccepted) {
  ASSERT_TRUE(encoded_.status.ok());
  ASSERT_EQ(encoded_.indices.size(), 10u + 5u + 20u);
  std::vector<float> accumulator = accumulator_;
  const PayloadView view(encoded_.indices, encoded_.values, {}, {});
  EXPECT_TRUE(
      TopKCodec::DecodeAdd(params_, layout_, CodecContext{}, view, 1.0f, accumulator, {}).ok());
}

TEST_F(TopKMalformedPayload, OutOfRangeIndex) {
  auto indices = encoded_.indices;
  indices.back() = static_cast<std::uint32_t>(layout_.dimension());
  ExpectRejected(indices, encoded_.values);
  indices.back() = 0xFFFFFFFFu;
  ExpectRejected(indices, encoded_.values);
}

TEST_F(TopKMalformedPayload, IndexInAnotherTensor) {
  // Tensor 0 holds [0, 100): its last index moved into tensor 1 keeps the payload ascending.
  auto indices = encoded_.indices;
  indices[9] = 100;
  ASSERT_LT(indices[9], indices[10]);
  ExpectRejected(indices, encoded_.values);
  // Tensor 1's first index moved back into tensor 0.
  indices = encoded_.indices;
  indices[10] = 99;
  ASSERT_GT(indices[10], indices[9]);
  ExpectRejected(indices, encoded_.values);
}

TEST_F(TopKMalformedPayload, DescendingOrRepeatedIndices) {
  auto indices = encoded_.indices;
  std::swap(indices[3], indices[4]);
  ExpectRejected(indices, encoded_.values);
  indices = encoded_.indices;
  indices[4] = indices[3];
  ExpectRejected(indices, encoded_.values);
}

TEST_F(TopKMalformedPayload, WrongFieldSizes) {
  auto indices = encoded_.indices;
  auto values = encoded_.values;
  indices.pop_back();
  ExpectRejected(indices, values);
  indices = encoded_.indices;
  values.push_back(1.0f);
  ExpectRejected(indices, values);
  ExpectRejected({}, {});
  // Extra fields that top_k does not have.
  std::vector<float> accumulator = accumulator_;
  const std::vector<std::uint32_t> words = {1};
  const PayloadView view(encoded_.indices, encoded_.values, words, {});
  EXPECT_EQ(TopKCodec::DecodeAdd(params_, layout_, CodecContext{}, view, 1.0f, accumulator, {}),
            Status::DataLoss());
}

TEST_F(TopKMalformedPayload, NonFiniteValue) {
  for (const float bad : {kNaN, kInf, -kInf}) {
    auto values = encoded_.values;
    values[values.size() / 2] = bad;
    ExpectRejected(encoded_.indices, values);
  }
}

TEST(TopKCodec, BadParametersAndBuffers) {
  const TensorLayout layout = Layout({100, 100});
  const std::vector<float> x = Normal(200, 2);
  for (const float ratio : {0.0f, -0.1f, 1.5f, kNaN, kInf}) {
    const TopKParams params{.k_ratio = ratio};
    EXPECT_EQ(TopKCodec::Shape(params, layout).status(), Status::InvalidArgument());
    EXPECT_EQ(TopKCodec::ScratchBytes(params, layout), 0u);
    std::vector<std::uint32_t> indices(200);
    std::vector<float> values(200);
    std::vector<std::byte> scratch(1 << 16);
    EXPECT_EQ(TopKCodec::Encode(params, layout, {}, x, {indices, values, {}, {}}, scratch),
              Status::InvalidArgument());
    std::vector<float> accumulator(200);
    EXPECT_EQ(TopKCodec::DecodeAdd(params, layout, {}, PayloadView(), 1.0f, accumulator, {}),
              Status::InvalidArgument());
  }

  const TopKParams params{.k_ratio = 0.1f};
  const PayloadShape shape = TopKCodec::Shape(params, layout).value();
  std::vector<std::uint32_t> indices(shape.indices);
  std::vector<float> values(shape.values);
  std::vector<std::byte> scratch(TopKCodec::ScratchBytes(params, layout));
  const PayloadSpans out{indices, values, {}, {}};
  EXPECT_TRUE(TopKCodec::Encode(params, layout, {}, x, out, scratch).ok());
  // Input size differs from the layout.
  EXPECT_EQ(
      TopKCodec::Encode(params, layout, {}, std::span<const float>(x).first(199), out, scratch),
      Status::InvalidArgument());
  // Output spans or scratch too small.
  EXPECT_EQ(
      TopKCodec::Encode(
          params, layout, {}, x,
          {std::span<std::uint32_t>(indices).first(shape.indices - 1), values, {}, {}}, scratch),
      Status::ResourceExhausted());
  EXPECT_EQ(TopKCodec::Encode(params, layout, {}, x,
                              {indices, std::span<float>(values).first(shape.values - 1), {}, {}},
                              scratch),
            Status::ResourceExhausted());
  EXPECT_EQ(TopKCodec::Encode(params, layout, {}, x, out,
                              std::span<std::byte>(scratch).first(scratch.size() - 1)),
            Status::ResourceExhausted());
  // Accumulator of the wrong size.
  std::vector<float> short_accumulator(199);
  const PayloadView view(indices, values, {}, {});
  EXPECT_EQ(TopKCodec::DecodeAdd(params, layout, {}, view, 1.0f, short_accumulator, {}),
            Status::InvalidArgument());
  // Empty layout.
  EXPECT_EQ(TopKCodec::Shape(params, TensorLayout()).status(), Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd
