#pragma once

#include <cstddef>

// Matrix products for the layers' inner loops, on row-major float arrays, that never allocate:
// Eigen's blocked product packs its operands on the heap when they outgrow the stack, so a
// build that links it references malloc. These keep a small block of the result in registers
// while they run over the summed dimension, and add in a fixed order, so a product gives the
// same bits on every machine of an architecture whatever its cache sizes.
namespace edgesgd::dense_products {

// out (rows x columns, row-major) += a (rows x depth) * b (columns x depth)^T: every result is
// the dot product of a row of a and a row of b, both contiguous.
void AddProductWithTransposed(float* out, const float* a, const float* b, std::size_t rows,
                              std::size_t columns, std::size_t depth);

// A factor matrix given by its strides: element (row, term) is at data[row * row_stride +
// term * term_stride], so a transposed matrix is the same array with the strides swapped.
struct Factors {
  const float* data = nullptr;
  std::size_t row_stride = 0;
  std::size_t term_stride = 0;
};

// out (rows x length, row-major) += factors (rows x terms) * b (terms x length, row-major): row
// r of out gains the rows of b weighted by row r of the factors.
void AddRowCombinations(float* out, Factors factors, const float* b, std::size_t rows,
                        std::size_t terms, std::size_t length);

}  // namespace edgesgd::dense_products
