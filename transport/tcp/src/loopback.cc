#include "edgesgd/tcp/loopback.h"

#include <memory>
#include <thread>
#include <vector>

namespace edgesgd::tcp {

HostResult<LoopbackResult> RunOnLoopback(protocol::ServerSession& server,
                                         std::span<protocol::WorkerSession* const> workers,
                                         std::function<void()> after_server_call,
                                         const LoopbackOptions& loopback) {
  DriverOptions server_options;
  server_options.listen = Endpoint{"127.0.0.1", 0};
  server_options.max_peer_id = server.options().workers;
  server_options.max_frame_bytes =
      protocol::ServerReceiveFrameBytes(server.config(), server.options().workers);
  server_options.log_name = "server";
  server_options.max_first_frame_bytes = wire::kMaxControlFrameBytes;
  server_options.auth_keys = loopback.keys;
  server_options.socket_send_buffer_bytes = loopback.socket_send_buffer_bytes;
  server_options.receive_low_watermark_bytes = loopback.receive_low_watermark_bytes;
  SessionDriver server_driver;
  EDGESGD_HOST_TRY(server_driver.Open(server_options));
  server_driver.SetAfterSessionCall(std::move(after_server_call));

  std::vector<std::unique_ptr<SessionDriver>> drivers;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    DriverOptions options;
    options.dial.push_back({protocol::kServerPeer, {"127.0.0.1", server_driver.listen_port()}});
    options.seed = w;
    options.log_name = "worker";
    options.auth_keys = loopback.keys;
    options.socket_send_buffer_bytes = loopback.socket_send_buffer_bytes;
    options.receive_low_watermark_bytes = loopback.receive_low_watermark_bytes;
    options.auth_device = static_cast<std::uint32_t>(w + 1);
    // Should the server stop without a Leave, workers end by themselves and the join returns.
    options.give_up_ns = 10'000 * kNsPerMs;
    drivers.push_back(std::make_unique<SessionDriver>());
    EDGESGD_HOST_TRY(drivers.back()->Open(options));
  }
  std::vector<std::thread> threads;
  threads.reserve(workers.size());
  for (std::size_t w = 0; w < workers.size(); ++w) {
    threads.emplace_back([&drivers, &workers, w] { drivers[w]->Run(*workers[w]); });
  }
  LoopbackResult result;
  result.server_stop = server_driver.Run(server);
  result.server_counters = server_driver.counters();
  for (std::thread& thread : threads) thread.join();
  return result;
}

}  // namespace edgesgd::tcp
