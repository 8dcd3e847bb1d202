#pragma once

#include <string>

#include "edgesgd/core/status.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp::internal {

// Resolves `endpoint` to its first TCP address (an IP literal without asking the resolver).
// Errors: kNotFound, with `detail` naming the host.
Status Resolve(asio::io_context& io, const Endpoint& endpoint, asio::ip::tcp::endpoint& out,
               std::string& detail);

}  // namespace edgesgd::tcp::internal
