#pragma once

// The one way edgesgd includes Asio: include this header, never <asio.hpp> directly. Standalone
// Asio 1.22 does not notice -fno-exceptions / -fno-rtti by itself, so the configuration is
// spelled out here, identically for every translation unit (the macros change class layouts and
// must agree across the program):
//   ASIO_STANDALONE      no Boost
//   ASIO_NO_EXCEPTIONS   errors only through the error_code& overloads, which is all edgesgd
//                        calls; Asio then needs asio::detail::throw_exception from the user
//   ASIO_NO_TYPEID       no RTTI (Asio otherwise uses typeid for service identity)
//   ASIO_NO_DEPRECATED   the current interface only
// transport/tcp sources include it, and so does a program that hands edgesgd its own event loop
// (an asio::io_context for SessionDriver, Server, Worker or Peer): the other public headers only
// declare asio::io_context, so Asio's configuration is decided here once.
// EDGESGD_TCP_TLS (set by the build when it found OpenSSL) adds Asio's TLS streams.

#if defined(ASIO_VERSION)
#error "asio was included before edgesgd/tcp/asio.h: include this wrapper instead"
#endif

#define ASIO_STANDALONE 1
#define ASIO_NO_EXCEPTIONS 1
#define ASIO_NO_TYPEID 1
#define ASIO_NO_DEPRECATED 1

#include "edgesgd/core/check.h"

namespace asio::detail {

// Asio calls this where it would throw: only from the throwing overloads (never called by
// edgesgd) and on conditions it considers unrecoverable (e.g. failing to create an eventfd
// while constructing an io_context). Either is fatal.
template <typename Exception>
[[noreturn]] void throw_exception(const Exception&) {
  ::edgesgd::PlatformFatal(__FILE__, __LINE__, "asio reported an unrecoverable error");
}

}  // namespace asio::detail

#include <asio.hpp>
#if EDGESGD_TCP_TLS
#include <asio/ssl.hpp>
#endif
