#pragma once

#include "edgesgd/platform/log.h"
#include "semihosting.h"

namespace edgesgd::mcu {

// An image's verdict: reports the pass and returns 0, or logs `failure` and returns 1 (the exit
// code run_mcu.sh checks).
inline int Verdict(bool passed, const char* failure) {
  if (!passed) {
    platform::Log(platform::LogLevel::kError, "EDGESGD-MCU FAIL: %s", failure);
    return 1;
  }
  platform::internal::ReportPass();
  return 0;
}

}  // namespace edgesgd::mcu
