#pragma once

// One serial line (edgesgd/tcp/serial_line.h) on an Asio loop: opens it, keeps it open —
// reopening a tty or reconnecting after a failure or a hang-up, every SerialLine::retry_ns —
// and moves bytes. What the bytes mean (a serial::Link) is the owner's business.

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/serial_line.h"

namespace edgesgd::tcp::internal {

class SerialPort {
 public:
  class Events {
   public:
    virtual void OnPortOpened() = 0;
    virtual void OnPortBytes(std::span<const std::byte> bytes) = 0;
    // After a hang-up or an error: the line reopens by itself.
    virtual void OnPortClosed(const std::string& why) = 0;
    // The write started by Write finished (all its bytes).
    virtual void OnPortWritten(std::size_t bytes) = 0;

   protected:
    ~Events() = default;
  };

  SerialPort(asio::io_context& io, Events& events, const char* log_name);
  SerialPort(const SerialPort&) = delete;
  SerialPort& operator=(const SerialPort&) = delete;

  // Checks `line` and, for kListen, binds its port now (so a busy port fails at once); a tty
  // that does not exist yet or a device not listening yet is waited for by Start. Errors:
  // kInvalidArgument (an unsupported baud rate), kNotFound (a host that does not resolve),
  // kUnavailable (cannot listen), the message naming the rate or address.
  HostResult<> Open(const SerialLine& line);
  void Start();
  // Closes the line for good (pending handlers finish with operation_aborted).
  void Stop();

  bool is_open() const { return open_; }
  bool writing() const { return writing_; }
  // Writes all of `bytes`, which must stay valid until OnPortWritten. False when the line is
  // closed or a write is already in progress.
  bool Write(std::span<const std::byte> bytes);
  // The port a kListen line listens on (the chosen one when the configured port was 0).
  std::uint16_t listen_port() const;

 private:
  void Reopen();  // after retry_ns
  void OpenNow();
  void OpenDevice();
  void Accept();
  void Adopt(asio::ip::tcp::socket& socket);  // a connected socket becomes the line
  void Opened();
  // Runs `operation` on the open line: the tty's descriptor or the TCP socket (kept as a
  // socket, whose sends do not raise SIGPIPE when the other end is gone).
  template <typename Operation>
  void OnStream(Operation&& operation);
  void ReadMore();
  void Close(const std::string& why);

  asio::io_context& io_;
  Events& events_;
  const char* log_name_;
  SerialLine line_;
  asio::ip::tcp::endpoint endpoint_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ip::tcp::socket socket_;        // connecting or being accepted
  asio::ip::tcp::socket line_socket_;   // the line, kinds kConnect and kListen
  asio::posix::stream_descriptor tty_;  // the line, kind kDevice
  asio::steady_timer retry_;
  std::array<std::byte, 4096> read_buffer_{};
  bool open_ = false;
  bool writing_ = false;
  bool stopped_ = false;
  std::uint64_t generation_ = 0;  // bumped per opened line: handlers of an older one do nothing
};

}  // namespace edgesgd::tcp::internal
