#pragma once

// The only way core code includes Eigen. Eigen's own assertions vanish under NDEBUG, and with
// them EIGEN_NO_MALLOC's check; routing eigen_assert to the platform fatal handler keeps both
// active in release builds. Core uses Eigen only through Eigen::Map over caller memory.

#include "edgesgd/core/check.h"

#ifndef eigen_assert
#define eigen_assert(condition) EDGESGD_CHECK(condition)
#endif

#include <Eigen/Core>

namespace edgesgd {

using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
// A row-major matrix over caller memory: a model's weights, one row per output.
using RowMajorMap =
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using ConstRowMajorMap =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

}  // namespace edgesgd
