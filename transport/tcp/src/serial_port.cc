#include "serial_port.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "edgesgd/platform/log.h"
#include "resolve.h"

namespace edgesgd::tcp {
namespace {

struct BaudRate {
  std::uint32_t rate;
  speed_t code;
};
constexpr BaudRate kBaudRates[] = {
    {9600, B9600},       {19200, B19200},     {38400, B38400},     {57600, B57600},
    {115200, B115200},   {230400, B230400},   {460800, B460800},   {500000, B500000},
    {576000, B576000},   {921600, B921600},   {1000000, B1000000}, {1152000, B1152000},
    {1500000, B1500000}, {2000000, B2000000}, {2500000, B2500000}, {3000000, B3000000},
    {3500000, B3500000}, {4000000, B4000000},
};

const BaudRate* FindBaud(std::uint32_t baud) {
  for (const BaudRate& entry : kBaudRates) {
    if (entry.rate == baud) return &entry;
  }
  return nullptr;
}

}  // namespace

bool SerialBaudSupported(std::uint32_t baud) { return FindBaud(baud) != nullptr; }

namespace internal {

using platform::Log;
using platform::LogLevel;

SerialPort::SerialPort(asio::io_context& io, Events& events, const char* log_name)
    : io_(io),
      events_(events),
      log_name_(log_name),
      acceptor_(io),
      socket_(io),
      line_socket_(io),
      tty_(io),
      retry_(io) {}

HostResult<> SerialPort::Open(const SerialLine& line) {
  line_ = line;
  if (line.kind == SerialLine::Kind::kDevice) {
    if (!SerialBaudSupported(line.baud)) {
      return HostError(Status::InvalidArgument("an unsupported baud rate"),
                       "baud rate " + std::to_string(line.baud) + " is not one a tty takes");
    }
    return {};
  }
  HostResult<asio::ip::tcp::endpoint> endpoint = Resolve(io_, line.endpoint);
  if (!endpoint.ok()) return std::move(endpoint).error();
  endpoint_ = *endpoint;
  if (line.kind == SerialLine::Kind::kConnect) return {};
  asio::error_code code;
  acceptor_.open(endpoint_.protocol(), code);
  if (!code) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), code);
  if (!code) acceptor_.bind(endpoint_, code);
  if (!code) acceptor_.listen(1, code);
  if (code) {
    return HostError(Status::Unavailable("cannot listen"),
                     "cannot listen on " + line.endpoint.host + ":" +
                         std::to_string(line.endpoint.port) + ": " + code.message());
  }
  return {};
}

std::uint16_t SerialPort::listen_port() const {
  asio::error_code code;
  const asio::ip::tcp::endpoint bound = acceptor_.local_endpoint(code);
  return code ? 0 : bound.port();
}

void SerialPort::Start() {
  if (line_.kind == SerialLine::Kind::kListen) {
    Accept();
  } else {
    OpenNow();
  }
}

void SerialPort::Stop() {
  stopped_ = true;
  asio::error_code ignored;
  retry_.cancel();
  acceptor_.close(ignored);
  socket_.close(ignored);
  line_socket_.close(ignored);
  tty_.close(ignored);
  open_ = false;
}

void SerialPort::Reopen() {
  if (stopped_ || line_.kind == SerialLine::Kind::kListen) return;  // Accept is still waiting
  retry_.expires_after(std::chrono::nanoseconds(line_.retry_ns));
  retry_.async_wait([this](const asio::error_code& error) {
    if (!error && !stopped_ && !open_) OpenNow();
  });
}

void SerialPort::OpenNow() {
  if (line_.kind == SerialLine::Kind::kDevice) {
    OpenDevice();
    return;
  }
  asio::error_code ignored;
  socket_.close(ignored);
  socket_.async_connect(endpoint_, [this](const asio::error_code& error) {
    if (stopped_) return;
    if (error) {
      asio::error_code ignored_close;
      socket_.close(ignored_close);
      Reopen();
      return;
    }
    Adopt(socket_);
  });
}

void SerialPort::OpenDevice() {
  const int fd = ::open(line_.device.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    Log(LogLevel::kWarning, "%s: cannot open %s: %s (trying again)", log_name_,
        line_.device.c_str(), std::strerror(errno));
    Reopen();
    return;
  }
  // Raw bytes at the configured rate; a file or pipe standing in for a tty has no attributes.
  termios attributes{};
  if (::tcgetattr(fd, &attributes) == 0) {
    ::cfmakeraw(&attributes);
    const speed_t speed = FindBaud(line_.baud)->code;
    ::cfsetispeed(&attributes, speed);
    ::cfsetospeed(&attributes, speed);
    attributes.c_cflag |= CLOCAL | CREAD;
    attributes.c_cc[VMIN] = 1;
    attributes.c_cc[VTIME] = 0;
    ::tcsetattr(fd, TCSANOW, &attributes);
    ::tcflush(fd, TCIOFLUSH);
  }
  asio::error_code code;
  tty_.assign(fd, code);
  if (code) {
    ::close(fd);
    Reopen();
    return;
  }
  Log(LogLevel::kInfo, "%s: serial line %s open", log_name_, line_.device.c_str());
  Opened();
}

void SerialPort::Accept() {
  if (stopped_) return;
  acceptor_.async_accept([this](const asio::error_code& error, asio::ip::tcp::socket socket) {
    if (stopped_) return;
    if (!error) {
      if (open_) Close("replaced by a newer connection");
      Adopt(socket);
    }
    Accept();
  });
}

void SerialPort::Adopt(asio::ip::tcp::socket& socket) {
  asio::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  line_socket_ = std::move(socket);
  Log(LogLevel::kInfo, "%s: serial line connected", log_name_);
  Opened();
}

void SerialPort::Opened() {
  open_ = true;
  ++generation_;
  events_.OnPortOpened();
  ReadMore();
}

template <typename Operation>
void SerialPort::OnStream(Operation&& operation) {
  if (line_.kind == SerialLine::Kind::kDevice) {
    operation(tty_);
  } else {
    operation(line_socket_);
  }
}

void SerialPort::ReadMore() {
  OnStream([this](auto& stream) {
    stream.async_read_some(
        asio::buffer(read_buffer_),
        [this, generation = generation_](const asio::error_code& error, std::size_t bytes) {
          if (stopped_ || generation != generation_) return;
          if (error) {
            Close(error == asio::error::eof ? std::string("the other end closed the line")
                                            : error.message());
            return;
          }
          events_.OnPortBytes(std::span<const std::byte>(read_buffer_.data(), bytes));
          if (open_ && generation == generation_) ReadMore();
        });
  });
}

bool SerialPort::Write(std::span<const std::byte> bytes) {
  if (!open_ || writing_) return false;
  writing_ = true;
  OnStream([this, bytes](auto& stream) {
    asio::async_write(
        stream, asio::buffer(bytes.data(), bytes.size()),
        [this, generation = generation_](const asio::error_code& error, std::size_t written) {
          if (stopped_ || generation != generation_) return;
          writing_ = false;
          if (error) {
            Close(error.message());
            return;
          }
          events_.OnPortWritten(written);
        });
  });
  return true;
}

void SerialPort::Close(const std::string& why) {
  asio::error_code ignored;
  line_socket_.close(ignored);
  tty_.close(ignored);
  open_ = false;
  writing_ = false;
  ++generation_;
  Log(LogLevel::kWarning, "%s: serial line closed: %s", log_name_, why.c_str());
  events_.OnPortClosed(why);
  Reopen();
}

}  // namespace internal
}  // namespace edgesgd::tcp
