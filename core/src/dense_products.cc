#include "dense_products.h"

#include <cstring>
#include <type_traits>

#include "edgesgd/core/eigen.h"

namespace edgesgd::dense_products {
namespace {

// Columns of a result block: two SSE or NEON registers of floats.
constexpr std::size_t kWidth = 8;

// The factors of rows `first`, `first` + 1, ...
Factors FromRow(Factors factors, std::size_t first) {
  factors.data += first * factors.row_stride;
  return factors;
}

#ifdef EIGEN_VECTORIZE

// Rows of a result block: 4 x kWidth sums, a row of b and a factor fit in 16 registers.
constexpr std::size_t kRows = 4;

// kWidth floats as one value of the compiler's generic vectors: two SSE or NEON registers, or
// one AVX register where the function they are inlined into is compiled for AVX2.
using Lanes = float __attribute__((vector_size(kWidth * sizeof(float))));

template <std::size_t kWidth>
using BlockRow = std::conditional_t<kWidth == 1, float, Lanes>;

// By reference, not by value: passing 32-byte vectors by value would depend on AVX being on.
template <std::size_t kWidth>
[[gnu::always_inline]] inline void Load(BlockRow<kWidth>& value, const float* from) {
  std::memcpy(&value, from, sizeof(value));
}

template <std::size_t kWidth>
[[gnu::always_inline]] inline void Store(float* to, const BlockRow<kWidth>& value) {
  std::memcpy(to, &value, sizeof(value));
}

// out[r][0..kWidth) += sum over terms t of factor(r, t) * b[t][0..kWidth), for kRows rows.
// Always inlined, so that it compiles for the instruction set of the Combine it is part of.
template <std::size_t kRows, std::size_t kWidth>
[[gnu::always_inline]] inline void CombineBlock(float* out, std::size_t out_stride,
                                                Factors factors, const float* b,
                                                std::size_t b_stride, std::size_t terms) {
  BlockRow<kWidth> sum[kRows];
  for (std::size_t r = 0; r < kRows; ++r) Load<kWidth>(sum[r], out + r * out_stride);
  for (std::size_t t = 0; t < terms; ++t) {
    BlockRow<kWidth> row;
    Load<kWidth>(row, b + t * b_stride);
    for (std::size_t r = 0; r < kRows; ++r) {
      sum[r] += factors.data[r * factors.row_stride + t * factors.term_stride] * row;
    }
  }
  for (std::size_t r = 0; r < kRows; ++r) Store<kWidth>(out + r * out_stride, sum[r]);
}

template <std::size_t kBlockRows>
[[gnu::always_inline]] inline void CombineRows(float* out, std::size_t out_stride,
                                               Factors factors, const float* b,
                                               std::size_t b_stride, std::size_t terms,
                                               std::size_t width) {
  std::size_t i = 0;
  for (; i + kWidth <= width; i += kWidth) {
    CombineBlock<kBlockRows, kWidth>(out + i, out_stride, factors, b + i, b_stride, terms);
  }
  for (; i < width; ++i) {
    CombineBlock<kBlockRows, 1>(out + i, out_stride, factors, b + i, b_stride, terms);
  }
}

// CombineRows over all rows, kRows at a time.
[[gnu::always_inline]] inline void CombineAll(float* out, std::size_t out_stride, Factors factors,
                                              const float* b, std::size_t b_stride,
                                              std::size_t rows, std::size_t terms,
                                              std::size_t width) {
  std::size_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    CombineRows<kRows>(out + r * out_stride, out_stride, FromRow(factors, r), b, b_stride, terms,
                       width);
  }
  for (; r < rows; ++r) {
    CombineRows<1>(out + r * out_stride, out_stride, FromRow(factors, r), b, b_stride, terms,
                   width);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The release build targets baseline x86-64 (SSE2); where the processor has AVX2 the same
// additions run on 8-float registers. Every sum still adds its terms in the same order, each a
// multiplication then an addition (no fused multiply-add: AVX2 does not include FMA), so both
// give the same bits.
[[gnu::target("avx2")]] void CombineAvx2(float* out, std::size_t out_stride, Factors factors,
                                        const float* b, std::size_t b_stride, std::size_t rows,
                                        std::size_t terms, std::size_t width) {
  CombineAll(out, out_stride, factors, b, b_stride, rows, terms, width);
}

void Combine(float* out, std::size_t out_stride, Factors factors, const float* b,
             std::size_t b_stride, std::size_t rows, std::size_t terms, std::size_t width) {
  if (__builtin_cpu_supports("avx2")) {
    CombineAvx2(out, out_stride, factors, b, b_stride, rows, terms, width);
  } else {
    CombineAll(out, out_stride, factors, b, b_stride, rows, terms, width);
  }
}
#else
void Combine(float* out, std::size_t out_stride, Factors factors, const float* b,
             std::size_t b_stride, std::size_t rows, std::size_t terms, std::size_t width) {
  CombineAll(out, out_stride, factors, b, b_stride, rows, terms, width);
}
#endif

#else

// Without SIMD (Cortex-M4F) the multiplications are the work: each row of out gains the rows of
// b one at a time, skipping zero factors (most slopes behind a ReLU and a max pool are zero).
// Each sum still adds its terms in order, so the results match the blocked path's.
void Combine(float* out, std::size_t out_stride, Factors factors, const float* b,
             std::size_t b_stride, std::size_t rows, std::size_t terms, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* target = out + r * out_stride;
    const Factors row_factors = FromRow(factors, r);
    for (std::size_t t = 0; t < terms; ++t) {
      const float factor = row_factors.data[t * row_factors.term_stride];
      if (factor == 0.0f) continue;
      const float* row = b + t * b_stride;
      for (std::size_t i = 0; i < width; ++i) target[i] += factor * row[i];
    }
  }
}

#endif

// Terms of b^T packed at a time: a panel of kPanelTerms x kWidth floats (512 B) on the stack.
constexpr std::size_t kPanelTerms = 16;

}  // namespace

void AddProductWithTransposed(float* out, const float* a, const float* b, std::size_t rows,
                              std::size_t columns, std::size_t depth) {
  float panel[kPanelTerms * kWidth];
  for (std::size_t j = 0; j < columns; j += kWidth) {
    const std::size_t width = columns - j < kWidth ? columns - j : kWidth;
    for (std::size_t k = 0; k < depth; k += kPanelTerms) {
      const std::size_t terms = depth - k < kPanelTerms ? depth - k : kPanelTerms;
      for (std::size_t t = 0; t < terms; ++t) {
        for (std::size_t c = 0; c < width; ++c) panel[t * kWidth + c] = b[(j + c) * depth + k + t];
      }
      Combine(out + j, columns, Factors{a + k, depth, 1}, panel, kWidth, rows, terms, width);
    }
  }
}

void AddRowCombinations(float* out, Factors factors, const float* b, std::size_t rows,
                        std::size_t terms, std::size_t length) {
  Combine(out, length, factors, b, length, rows, terms, length);
}

}  // namespace edgesgd::dense_products
