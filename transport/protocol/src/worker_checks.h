#pragma once

// The worker's checks of a run that need no session (not part of the public API).

#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol::internal {

// Whether two Welcomes describe the same run (floats compared bit for bit).
bool SameWelcome(const wire::WelcomeInfo& a, const wire::WelcomeInfo& b);

}  // namespace edgesgd::protocol::internal
