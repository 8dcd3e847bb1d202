// The check counter of the embedded test images: each image counts its checks, logs every one
// that fails, and ends with one summary line, the same way on every image.

#ifndef EDGESGD_TESTS_EMBEDDED_MCU_CHECKS_H_
#define EDGESGD_TESTS_EMBEDDED_MCU_CHECKS_H_

#include "edgesgd/core/status.h"
#include "edgesgd/platform/log.h"

namespace edgesgd::mcu_test {

class Checks {
 public:
  // Counts one check and logs `what` unless it holds; returns `holds`.
  bool Expect(bool holds, const char* what) {
    ++checked_;
    if (holds) return true;
    ++failures_;
    platform::Log(platform::LogLevel::kError, "FAIL %s", what);
    return false;
  }

  // Expect(status.ok()), and the status's reason when it is an error.
  bool ExpectOk(const Status& status, const char* what) {
    if (Expect(status.ok(), what)) return true;
    platform::Log(platform::LogLevel::kError, "  %s", status.reason());
    return false;
  }

  int checked() const { return checked_; }
  bool all_held() const { return failures_ == 0; }

  // True when every check held; otherwise logs how many of the `kind` checks failed.
  bool Report(const char* kind) const {
    if (all_held()) return true;
    platform::Log(platform::LogLevel::kError, "EDGESGD-MCU FAIL: %d of %d %s failed", failures_,
                  checked_, kind);
    return false;
  }

 private:
  int checked_ = 0;
  int failures_ = 0;
};

}  // namespace edgesgd::mcu_test

#endif  // EDGESGD_TESTS_EMBEDDED_MCU_CHECKS_H_
