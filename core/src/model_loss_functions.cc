#include <cmath>

#include "edgesgd/core/check.h"
#include "edgesgd/core/model/loss_functions.h"

namespace edgesgd {

SoftmaxCrossEntropyResult SoftmaxCrossEntropyInPlace(std::span<float> logits, std::size_t label) {
  EDGESGD_CHECK(label < logits.size());
  SoftmaxCrossEntropyResult result;
  float max_logit = logits[0];
  for (std::size_t c = 1; c < logits.size(); ++c) {
    if (logits[c] > max_logit) {
      max_logit = logits[c];
      result.argmax = c;
    }
  }
  const float shifted_label = logits[label] - max_logit;
  float total = 0.0f;
  for (float& value : logits) {
    value = std::exp(value - max_logit);
    total += value;
  }
  const float inverse_total = 1.0f / total;
  for (float& value : logits) value *= inverse_total;
  result.loss = std::log(total) - shifted_label;
  return result;
}

LogisticLossResult LogisticLoss(float logit, bool positive) {
  const float y = positive ? 1.0f : 0.0f;
  const float magnitude = std::fabs(logit);
  const float exp_negative = std::exp(-magnitude);  // in (0, 1]
  LogisticLossResult result;
  result.loss = (logit > 0.0f ? logit : 0.0f) + std::log1p(exp_negative) - y * logit;
  // sigmoid(z) from e^-|z| without overflow on either side.
  const float sigmoid =
      logit >= 0.0f ? 1.0f / (1.0f + exp_negative) : exp_negative / (1.0f + exp_negative);
  result.slope = sigmoid - y;
  return result;
}

}  // namespace edgesgd
