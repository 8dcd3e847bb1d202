#pragma once

// A device's own shard of Fashion-MNIST at full resolution (28x28 = 784 byte features, 10
// classes), compiled into flash by make_fashion_slice.py --full (see CMakeLists.txt). It is a
// core DatasetView over byte features, so SampleBatch draws mini-batches from it directly and
// converts only the drawn rows (pixel / 255) into the caller's float buffer.

#include <cstddef>

#include "edgesgd/core/data/dataset.h"

namespace edgesgd::mcu {

inline constexpr std::size_t kShardFeatures = 28 * 28;
inline constexpr std::size_t kShardClasses = 10;

// Defined by the generated source: training images only (the server evaluates).
extern const DatasetView kFashionShard;

}  // namespace edgesgd::mcu
