#include "dense_products.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/core/random.h"

namespace edgesgd::dense_products {
namespace {

std::vector<float> RandomValues(std::size_t count, std::uint32_t stream) {
  CounterRng rng(0x5EED, 0, 0, stream);
  std::vector<float> values(count);
  for (float& value : values) value = rng.NextFloat() * 2.0f - 1.0f;
  return values;
}

// Each product, whatever its instruction set (SSE2, AVX2, NEON or none), adds a result's terms
// one after the other, a multiplication then an addition each: the same bits as this loop.
float InOrder(float start, std::size_t terms, const float* a, std::size_t a_step, const float* b,
              std::size_t b_step) {
  float sum = start;
  for (std::size_t t = 0; t < terms; ++t) {
    const float product = a[t * a_step] * b[t * b_step];
    sum += product;
  }
  return sum;
}

// Sizes around the blocks' (4 rows, 8 columns, 16 terms a panel) and their tails.
constexpr std::size_t kSizes[] = {1, 3, 4, 7, 8, 9, 17, 33};

TEST(DenseProductsTest, ProductWithTransposedAddsTermsInOrder) {
  for (const std::size_t rows : kSizes) {
    for (const std::size_t columns : kSizes) {
      for (const std::size_t depth : kSizes) {
        const std::vector<float> a = RandomValues(rows * depth, 1);
        const std::vector<float> b = RandomValues(columns * depth, 2);
        std::vector<float> out = RandomValues(rows * columns, 3);
        const std::vector<float> start = out;
        AddProductWithTransposed(out.data(), a.data(), b.data(), rows, columns, depth);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t c = 0; c < columns; ++c) {
            const float expected =
                InOrder(start[r * columns + c], depth, &a[r * depth], 1, &b[c * depth], 1);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(out[r * columns + c]),
                      std::bit_cast<std::uint32_t>(expected))
                << rows << "x" << columns << "x" << depth << " at " << r << "," << c;
          }
        }
      }
    }
  }
}

TEST(DenseProductsTest, RowCombinationsAddTermsInOrderWithEitherFactorLayout) {
  for (const std::size_t rows : kSizes) {
    for (const std::size_t terms : kSizes) {
      for (const std::size_t length : kSizes) {
        const std::vector<float> factors = RandomValues(rows * terms, 4);
        const std::vector<float> b = RandomValues(terms * length, 5);
        for (const bool transposed : {false, true}) {
          const Factors layout =
              transposed ? Factors{factors.data(), 1, rows} : Factors{factors.data(), terms, 1};
          std::vector<float> out = RandomValues(rows * length, 6);
          const std::vector<float> start = out;
          AddRowCombinations(out.data(), layout, b.data(), rows, terms, length);
          for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t i = 0; i < length; ++i) {
              const float expected =
                  InOrder(start[r * length + i], terms, layout.data + r * layout.row_stride,
                          layout.term_stride, &b[i], length);
              ASSERT_EQ(std::bit_cast<std::uint32_t>(out[r * length + i]),
                        std::bit_cast<std::uint32_t>(expected))
                  << rows << "x" << terms << "x" << length << (transposed ? " transposed" : "");
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace edgesgd::dense_products
