#pragma once

#include "edgesgd/platform/result.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp::internal {

// Resolves `endpoint` to its first TCP address (an IP literal without asking the resolver).
// Errors: kNotFound, the message naming the host.
HostResult<asio::ip::tcp::endpoint> Resolve(asio::io_context& io, const Endpoint& endpoint);

}  // namespace edgesgd::tcp::internal
