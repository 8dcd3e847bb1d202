// `edgesgd peer`: a gossip peer over TCP, a tcp::Peer of the flags' run. Every peer takes the
// full flags and the same --peers list (there is no server to hand the run out); metrics rows
// and the summary are simulate's, with wall-clock seconds.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/gossip_flags.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/task.h"
#include "cli/tcp_flags.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/tcp/peer.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kPeer = "peer";

int RunPeer(const PeerFlags& o) {
  tcp::PeerSettings settings;
  HostResult<tcp::Endpoint> listen = tcp::ParseEndpoint(o.listen);
  if (!listen.ok()) return Fail(kPeer, "--listen " + listen.message(), 2);
  settings.listen = *listen;
  HostResult<std::vector<tcp::Endpoint>> parsed = tcp::ParseEndpointList(o.peers);
  if (!parsed.ok()) return Fail(kPeer, "--peers " + parsed.message(), 2);
  const std::vector<tcp::Endpoint> addresses = std::move(parsed).value();
  AuthKeys keys;
  if (const HostResult<> loaded = LoadAuthKeys(o.network, o.id, KeysKept::kEveryDevice, keys);
      !loaded.ok()) {
    return Fail(kPeer, loaded.message(), 2);
  }
  const std::size_t n = addresses.size();
  if (o.id < 1 || o.id > n) {
    return Fail(kPeer,
                "--id " + std::to_string(o.id) + " is not a position in --peers (1.." +
                    std::to_string(n) + ": the list holds every peer's address in id order)",
                2);
  }
  if (o.workers_given && o.workers != n) {
    return Fail(kPeer, "the number of peers is the length of --peers: drop --workers", 2);
  }
  if (const HostResult<> checked = CheckGossipConsistency(o); !checked.ok()) {
    return Fail(kPeer, checked.message(), 2);
  }
  HostResult<GossipPlan> built = BuildGossipPlan(o, n);
  if (!built.ok()) return Fail(kPeer, built.message(), 2);
  const GossipPlan plan = std::move(built).value();
  if (!o.quiet) PrintGossipPlan(kPeer, o, plan);
  Task task;
  if (const int code = SetUpTask(kPeer, o, n, task); code != 0) return code;
  settings.config = BuildGossipConfig(o, task, plan, o.id);
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  settings.gossip.gradient = &Task::GradientCallback;
  settings.gossip.user = task.binding(o.id - 1);
  settings.gossip.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(o.id - 1));
  settings.gossip.initial_model = initial;
  settings.gossip.codecs = &AllCodecs();
  for (std::size_t i = 0; i < n; ++i) {
    settings.neighbours.push_back({static_cast<protocol::PeerId>(i + 1), addresses[i]});
  }
  settings.network = NetworkOptions(o.network, o.seed * 1000003u + o.id, kPeer, keys);
  settings.network.max_peer_id = static_cast<protocol::PeerId>(n);
  tcp::Peer peer;
  if (const HostResult<> opened = peer.Open(settings); !opened.ok()) {
    // The session refused the flags (2), or the network is not usable (1).
    return Fail(kPeer, opened.message(),
                peer.session().phase() == protocol::GossipPhase::kUninitialized ? 2 : 1);
  }
  if (const HostResult<> written = WritePortFile(o.network, peer.listen_port()); !written.ok()) {
    return Fail(kPeer, written.message(), 1);
  }

  MetricsWriter metrics;
  if (!o.metrics.empty()) {
    if (const HostResult<> opened = metrics.Open(o.metrics); !opened.ok()) {
      return Fail(kPeer, opened.message(), 1);
    }
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  MetricsRow last;
  peer.OnRound([&](const protocol::GossipRoundEvent& event, std::span<const float> model) {
    MetricsRow row = GossipRow(settings.config, event.round, event.time_closed, event.bytes_sent,
                               event.bytes_received);
    if (EvaluatesRound(o, row.round)) {
      EvaluateInto(task, model, row);
      last = row;
    }
    metrics.Write(row);
    progress.Update(row);
  });
  peer.OnReject([&](const protocol::GossipRejectEvent& reject) {
    progress.Note("peer %u rejected a frame from peer %u in round %u: %s", o.id, reject.peer,
                  reject.round + 1, protocol::GossipRejectReasonName(reject.reason));
  });
  WarnIfUnauthenticated(o.network, kPeer);
  const tcp::DriverStop stop = peer.Run();
  progress.Finish();
  if (const HostResult<> closed = metrics.Close(); !closed.ok()) {
    return Fail(kPeer, closed.message(), 1);
  }
  const protocol::GossipPeerSession& session = peer.session();
  if (stop != tcp::DriverStop::kFinished || !session.Finished()) {
    char detail[64];
    std::snprintf(detail, sizeof(detail), " after %u of %u rounds", session.round(), o.rounds);
    const int code = ExitCodeFor(stop, kPeer, detail);
    return code == 0 ? 1 : code;
  }
  SummaryWriter summary;
  WriteGossipRunSummary(summary, o, n, task.dimension(), last);
  summary.Field("peer", o.id);
  WritePeerGossip(summary, o, plan, session.counters(), peer.network_counters());
  HostResult<> saved = o.summary.empty() ? HostResult<>() : summary.Save(o.summary);
  if (saved.ok()) saved = SaveModel(o, session.model());
  if (!saved.ok()) return Fail(kPeer, saved.message(), 1);
  if (!o.quiet) {
    std::fprintf(stderr, "edgesgd peer %u: done: %u rounds in %.1f s; loss %.4f, accuracy %s\n",
                 o.id, o.rounds, last.time_s, last.loss, FormatAccuracy(last.accuracy).c_str());
  }
  return 0;
}

}  // namespace

void AddPeerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PeerFlags>();
  CLI::App* command = app.add_subcommand(
      "peer",
      "Gossip peer over TCP: D-PSGD, gradient tracking, DeTAG or CHOCO (--gossip) with its "
      "neighbours on --topology; every peer takes the same flags and the same --peers list.");
  AddPeerFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunPeer(*o); });
}

}  // namespace edgesgd::cli
