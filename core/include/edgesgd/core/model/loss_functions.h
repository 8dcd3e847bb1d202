#pragma once

#include <cstddef>
#include <span>

namespace edgesgd {

// Numerically stable losses on logits, shared by the model kernels.

struct SoftmaxCrossEntropyResult {
  float loss = 0.0f;       // -ln softmax(z)[label] = logsumexp(z) - z[label]
  std::size_t argmax = 0;  // predicted class (ties: lowest index)
};

// Replaces `logits` (non-empty) by softmax probabilities and returns the cross-entropy against
// `label` (< logits.size(), a programmer error otherwise). Subtracting max z before exp keeps
// every exponent <= 0, so nothing overflows; the loss is computed as ln(sum exp(z - max)) -
// (z[label] - max) rather than -ln p[label], which stays finite when p[label] underflows.
// Does not allocate.
SoftmaxCrossEntropyResult SoftmaxCrossEntropyInPlace(std::span<float> logits, std::size_t label);

struct LogisticLossResult {
  float loss = 0.0f;   // ln(1 + e^z) - y z
  float slope = 0.0f;  // d loss / d z = sigmoid(z) - y
};

// Binary cross-entropy on a logit z with label y in {0, 1}, as max(z, 0) + ln(1 + e^-|z|) - y z
// so that no exponent is positive. Does not allocate.
LogisticLossResult LogisticLoss(float logit, bool positive);

}  // namespace edgesgd
