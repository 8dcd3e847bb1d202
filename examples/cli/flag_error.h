#pragma once

// How the command line refuses what it was given: kInvalidArgument with the line for the user,
// which names the flag, file or line at fault and why.

#include <string>
#include <utility>

#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

inline HostError FlagError(std::string message) {
  return HostError(Status::InvalidArgument(), std::move(message));
}

}  // namespace edgesgd::cli
