// Addresses as users write them (HOST:PORT), and their resolution.
#include <charconv>
#include <string>

#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/session_driver.h"
#include "resolve.h"

namespace edgesgd::tcp {
namespace {

// Appended piece by piece: GCC 12 misreports "'" + std::string + "..." as an overlapping copy
// (-Wrestrict) once inlined here.
std::string Quoted(std::string_view text) {
  std::string quoted(1, '\'');
  quoted.append(text);
  quoted.push_back('\'');
  return quoted;
}

}  // namespace

HostResult<Endpoint> ParseEndpoint(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return HostError(Status::InvalidArgument("an address is not HOST:PORT"),
                     Quoted(text) + " is not HOST:PORT");
  }
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, parse_error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parse_error != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return HostError(Status::InvalidArgument("a port is not a number in 0..65535"),
                     Quoted(text) + ": the port must be a number in 0..65535");
  }
  return Endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

HostResult<std::vector<Endpoint>> ParseEndpointList(std::string_view text) {
  std::vector<Endpoint> endpoints;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    HostResult<Endpoint> endpoint = ParseEndpoint(text.substr(0, comma));
    if (!endpoint.ok()) return std::move(endpoint).error();
    endpoints.push_back(std::move(endpoint).value());
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (endpoints.empty()) return HostError(Status::InvalidArgument("an empty address list"));
  return endpoints;
}

HostResult<asio::ip::tcp::endpoint> internal::Resolve(asio::io_context& io,
                                                      const Endpoint& endpoint) {
  asio::error_code code;
  const asio::ip::address address = asio::ip::make_address(endpoint.host, code);
  if (!code) return asio::ip::tcp::endpoint(address, endpoint.port);
  asio::ip::tcp::resolver resolver(io);
  const auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), code);
  if (code || results.empty()) {
    return HostError(Status::NotFound("a host name does not resolve"),
                     "cannot resolve '" + endpoint.host + "': " + code.message());
  }
  return results.begin()->endpoint();
}

}  // namespace edgesgd::tcp
