// Fuzz target: the server checkpoint loader (ServerSession::RestoreState over
// protocol/checkpoint.h's ReadCheckpoint and the aggregation component's state).
//
// Input: u8 run configuration, u8 flags (bit 0: the harness rewrites the trailing FNV-1a
// checksum, so that mutated checkpoints get past it and reach the field checks), then the
// checkpoint's bytes. Invariants:
//   - an accepted checkpoint saves back to exactly the same bytes (SaveState right after
//     RestoreState) — except, for a checkpoint of a finished run, the frame sequence counter,
//     which is then exactly one more: the restore builds the final Leave;
//   - a refused checkpoint changes nothing: SaveState gives the same bytes as before;
//   - a restored server starts: once every worker joins, every frame it sends decodes, and its
//     model is finite.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "edgesgd/protocol/server_session.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/session_frames.h"

namespace edgesgd::fuzz {
namespace {

using protocol::ServerSession;

std::vector<std::byte> Save(const ServerSession& server) {
  std::vector<std::byte> bytes(server.StateBytes());
  const Result<std::size_t> written = server.SaveState(bytes);
  EDGESGD_FUZZ_CHECK(written.ok() && written.value() == bytes.size(),
                     "SaveState writes StateBytes() bytes");
  return bytes;
}

void Run(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const protocol::RunConfig& config = RunConfigAt(in.U8()).config;
  const std::uint8_t flags = in.U8();
  const std::span<const std::byte> rest = in.Rest();
  std::vector<std::byte> checkpoint(rest.begin(), rest.end());
  if ((flags & 1) != 0 && checkpoint.size() >= 8) {
    const std::uint64_t checksum =
        Fnv1a(std::span<const std::byte>(checkpoint).first(checkpoint.size() - 8));
    std::memcpy(checkpoint.data() + checkpoint.size() - 8, &checksum, 8);
  }

  const protocol::ServerOptions options = ServerOptionsFor(kDefaultServerFlags);
  ArenaStorage storage(ServerSession::ArenaBytes(config, options));
  ServerSession server;
  EDGESGD_FUZZ_CHECK(
      server.Init(storage.arena, AllCodecs(), config, options, InitialModel(config)).ok(),
      "the harness's server initializes");
  const std::vector<std::byte> before = Save(server);

  std::string_view differing;
  const Status restored = server.RestoreState(checkpoint, &differing);
  const std::vector<std::byte> after = Save(server);
  if (!restored.ok()) {
    EDGESGD_FUZZ_CHECK(after == before, "a refused checkpoint changes nothing");
    return;
  }
  std::vector<std::byte> comparable = after;
  if (server.Finished()) {
    // Restoring a finished run builds the final Leave at once, and building a frame takes the
    // next sequence number: the saved counter is one more, the rest must be the same.
    std::uint32_t configuration_bytes = 0;
    std::memcpy(&configuration_bytes, checkpoint.data() + 12, 4);
    const std::size_t at = 16 + std::size_t{configuration_bytes} + 8;
    std::uint64_t restored_sequence = 0;
    std::uint64_t saved_sequence = 0;
    std::memcpy(&restored_sequence, checkpoint.data() + at, 8);
    std::memcpy(&saved_sequence, after.data() + at, 8);
    EDGESGD_FUZZ_CHECK(saved_sequence == restored_sequence + 1,
                       "restoring a finished run takes one sequence number (its Leave)");
    std::memcpy(comparable.data() + at, &restored_sequence, 8);
    const std::uint64_t checksum =
        Fnv1a(std::span<const std::byte>(comparable).first(comparable.size() - 8));
    std::memcpy(comparable.data() + comparable.size() - 8, &checksum, 8);
  }
  if (comparable != checkpoint) {
    std::size_t at = 0;
    while (at < comparable.size() && at < checkpoint.size() && comparable[at] == checkpoint[at]) {
      ++at;
    }
    std::fprintf(stderr, "accepted %zu bytes, saved %zu; first difference at byte %zu\n",
                 checkpoint.size(), comparable.size(), at);
  }
  EDGESGD_FUZZ_CHECK(comparable == checkpoint,
                     "an accepted checkpoint saves back to the same bytes");
  EDGESGD_FUZZ_CHECK(server.round() <= config.rounds, "a restored round is within the run");

  // The restored server runs: workers join and get frames that decode.
  FrameMaker maker;
  TimeNs now = 0;
  server.Start(now);
  DrainAndCheck(server, 1, kWorkers);
  for (PeerId worker = 1; worker <= kWorkers; ++worker) {
    wire::JoinInfo join;
    join.architecture = wire::HostArchitecture();
    join.codecs = AllCodecs().Mask();
    server.OnFrame(worker, maker.Join({worker, 0, worker}, join), now);
    DrainAndCheck(server, 1, kWorkers);
  }
  now += 2000 * kMs;
  if (server.NextWakeup() <= now) {
    server.OnTimer(now);
    DrainAndCheck(server, 1, kWorkers);
  }
  if (server.status().ok()) {
    for (const float value : server.model()) {
      EDGESGD_FUZZ_CHECK(std::isfinite(value), "a restored server's model is finite");
    }
  }
}

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::Run(data, size);
  return 0;
}
