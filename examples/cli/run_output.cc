// The output side of a training run (declared in run_flags.h): its memory plan, the server's
// counters, the metrics rows of parameter-server and gossip rounds, the run summary and the
// final line.
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/run_flags.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/worker_session.h"

namespace edgesgd::cli {

MemoryPlan MakeMemoryPlan(const protocol::RunConfig& config,
                          const protocol::ServerOptions& options) {
  MemoryPlan plan;
  plan.server_arena = protocol::ServerSession::ArenaBytes(config, options);
  plan.worker_arena = protocol::WorkerSession::ArenaBytes(config, options.workers);
  if (config.aggregation == protocol::AggregationKind::kMean) {
    plan.worker_feedback_state =
        ErrorFeedbackWorker::StateBytes(config.layout, config.codec, config.feedback);
    plan.worker_selection_state =
        ErrorFeedbackWorker::SelectionStateBytes(config.layout, config.codec);
  }
  plan.worker_codec_scratch = CodecScratchBytes(config.codec, config.layout);
  plan.update_payload = MaxEncodedBytes(config.codec, config.layout);
  plan.update_frame = protocol::UpdateFrameBytes(config);
  plan.broadcast_frame = protocol::BroadcastFrameBytes(config);
  return plan;
}

void WriteServerCounters(SummaryWriter& summary, const protocol::ServerCounters& counters) {
  summary.Field("server_rejected_frames", counters.total_rejected());
  summary.Field("updates_accepted", counters.updates_accepted);
  // Updates of a closed round, or (--buffer) older than --max-staleness: dropped.
  summary.Field("stale_updates_dropped", counters.rejected_for(protocol::RejectReason::kStale) +
                                             counters.rejected_for(protocol::RejectReason::kLate));
  summary.Field("deadline_extensions", counters.deadline_extensions);
  summary.Field("secure_rounds_aborted", counters.secure_rounds_aborted);
  summary.Field("secure_messages_resent", counters.secure_messages_resent);
  summary.Field("secure_restarts_left", counters.secure_restarts_left);
}

void WriteMemoryPlan(SummaryWriter& summary, const MemoryPlan& plan) {
  summary.Begin("memory_plan");
  summary.Field("server_arena_bytes", plan.server_arena);
  summary.Field("worker_arena_bytes", plan.worker_arena);
  summary.Field("worker_error_feedback_bytes", plan.worker_feedback_state);
  summary.Field("worker_selection_state_bytes", plan.worker_selection_state);
  summary.Field("worker_codec_scratch_bytes", plan.worker_codec_scratch);
  summary.Field("update_payload_bytes", plan.update_payload);
  summary.Field("update_frame_max_bytes", plan.update_frame);
  summary.Field("broadcast_frame_max_bytes", plan.broadcast_frame);
  summary.End();
}

double PayloadBitsPerCoordinate(const protocol::RunConfig& config) {
  return 8.0 * static_cast<double>(MaxEncodedBytes(config.codec, config.layout)) /
         static_cast<double>(config.layout.dimension());
}

bool EvaluatesRound(const RunFlags& o, std::uint32_t row_round) {
  return row_round % o.eval_every == 0 || row_round == o.rounds;
}

void EvaluateInto(Task& task, std::span<const float> model, MetricsRow& row) {
  const TaskEvaluation evaluation = task.Evaluate(model);
  row.loss = evaluation.loss;
  row.accuracy = evaluation.accuracy;
  row.dist_to_opt = evaluation.log10_dist_to_opt;
}

ServerRunOutput::ServerRunOutput(const RunFlags& flags, const protocol::RunConfig& config,
                                 Task& task, MetricsWriter& metrics, ProgressLine& progress,
                                 Readout readout)
    : flags_(flags),
      task_(task),
      metrics_(metrics),
      progress_(progress),
      readout_(std::move(readout)),
      bits_per_coord_(PayloadBitsPerCoordinate(config)),
      private_(config.privacy.mode != PrivacyMode::kOff) {}

void ServerRunOutput::OnRound(const protocol::RoundEvent& event, std::span<const float> model) {
  MetricsRow row;
  row.round = event.round + 1;
  row.time_s = static_cast<double>(event.time_closed) * 1e-9;
  row.bytes_up = event.bytes_up;
  row.bytes_down = event.bytes_down;
  row.bits_per_coord =
      event.reported == 0
          ? bits_per_coord_
          : static_cast<double>(event.payload_bits) /
                (static_cast<double>(event.reported) * static_cast<double>(task_.dimension()));
  row.epsilon = private_ ? event.epsilon : kNotApplicable;
  if (!event.abort_reason.ok()) {
    progress_.Note(
        "round %u was aborted, the model unchanged: %s", row.round,
        event.abort_reason.reason() != nullptr ? event.abort_reason.reason() : "no reason given");
  }
  if (EvaluatesRound(flags_, row.round)) {
    EvaluateInto(task_, readout_ ? readout_(model) : model, row);
    last_ = row;
    if (non_finite_loss_round_ == 0 && !std::isfinite(row.loss)) {
      non_finite_loss_round_ = row.round;
    }
  }
  metrics_.Write(row);
  progress_.Update(row);
}

std::string RunFailure(std::uint32_t rounds, Status status) {
  std::string message = "the run failed in round " + std::to_string(rounds + 1) + ": " +
                        (status.reason() != nullptr ? status.reason() : "no reason given");
  if (status.code() != StatusCode::kDataLoss) return message;
  message += " (lower --lr or --server-lr, or clip the updates";
  if (message.find("max_model_norm") != std::string::npos) {
    message += "; raise --max-model-norm if a model this large is expected";
  }
  return message + ")";
}

void ServerRunOutput::OnReject(const protocol::RejectEvent& reject) {
  progress_.Note("server rejected a frame from peer %u in round %u: %s", reject.peer,
                 reject.round + 1, protocol::RejectReasonName(reject.reason));
}

MetricsRow GossipRow(const protocol::GossipConfig& config, std::uint32_t round,
                     protocol::TimeNs time_ns, std::uint64_t bytes_up, std::uint64_t bytes_down) {
  MetricsRow row;
  row.round = round + 1;
  row.time_s = static_cast<double>(time_ns) * 1e-9;
  row.bytes_up = bytes_up;
  row.bytes_down = bytes_down;
  row.bits_per_coord = 8.0 * static_cast<double>(MaxEncodedBytes(config.codec, config.layout)) /
                       static_cast<double>(config.layout.dimension());
  return row;
}

void WriteGossipRunSummary(SummaryWriter& summary, const RunFlags& o, std::size_t peers,
                           std::size_t parameters, const MetricsRow& final_row) {
  summary.Field("task", o.task);
  summary.Field("mode", "gossip");
  summary.Field("topology", o.topology);
  summary.Field("workers", peers);
  summary.Field("rounds", o.rounds);
  summary.Field("seed", o.seed);
  summary.Field("parameters", parameters);
  summary.Row("final", final_row);
}

void WriteRunSummary(SummaryWriter& summary, const RunFlags& o, const protocol::RunConfig& config,
                     std::size_t parameters, const MetricsRow& final_row) {
  summary.Field("task", o.task);
  summary.Field("codec", o.codec.codec());
  summary.Begin("codec_parameters");
  ForEachParamField(config.codec, [&summary](const CodecFieldValue& field) {
    const std::string name(field.name);
    if (field.kind == ParamKind::kReal) {
      summary.Field(name.c_str(), static_cast<double>(std::bit_cast<float>(field.word)));
    } else if (field.kind == ParamKind::kChoice && field.word < field.choices.size()) {
      summary.Field(name.c_str(), std::string(field.choices[field.word]));
    } else {
      summary.Field(name.c_str(), field.word);
    }
  });
  summary.End();
  summary.Field("aggregate", o.aggregate);
  WriteRobustSummary(summary, config.robust);
  WriteServerOptimizerSummary(summary, config.server_optimizer);
  WriteAsyncSummary(summary, config.async);
  WriteSecureSummary(summary, config, static_cast<std::uint32_t>(o.workers));
  if (config.privacy.mode != PrivacyMode::kOff) {
    // The final row's epsilon is the guarantee of the whole run.
    summary.Begin("privacy");
    summary.Field(
        "mode",
        std::string(config.privacy.mode == PrivacyMode::kCentral ? "central" : "distributed"));
    summary.Field("clip", static_cast<double>(config.privacy.clip));
    summary.Field("noise_multiplier", static_cast<double>(config.privacy.noise_multiplier));
    summary.Field("delta", static_cast<double>(config.privacy.delta));
    // Poisson sampling: each live device joins a round with probability P.
    summary.Field("sampling_rate", static_cast<double>(config.participation));
    if (AdaptsClipping(config.privacy)) {
      summary.Field("target_quantile", static_cast<double>(config.privacy.target_quantile));
      summary.Field("clip_lr", static_cast<double>(config.privacy.clip_learning_rate));
      summary.Field("count_noise", static_cast<double>(config.privacy.count_noise));
    }
    summary.Field("epsilon", final_row.epsilon);
    summary.End();
  }
  summary.Field("feedback",
                config.aggregation == protocol::AggregationKind::kMean ? o.feedback : "none");
  summary.Field("workers", o.workers);
  summary.Field("rounds", o.rounds);
  summary.Field("seed", o.seed);
  summary.Field("parameters", parameters);
  summary.Row("final", final_row);
}

int FinishServerRun(const char* command, const char* seconds, const RunFlags& o,
                    const SummaryWriter& summary, std::span<const float> model,
                    const MetricsRow& last) {
  HostResult<> saved = o.summary.empty() ? HostResult<>() : summary.Save(o.summary);
  if (saved.ok()) saved = SaveModel(o, model);
  if (!saved.ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", command, saved.message().c_str());
    return 1;
  }
  if (!o.quiet) {
    std::fprintf(stderr,
                 "edgesgd %s: done: %u rounds in %.1f %s; loss %.4f, accuracy %s; %llu bytes up, "
                 "%llu bytes down\n",
                 command, o.rounds, last.time_s, seconds, last.loss,
                 FormatAccuracy(last.accuracy).c_str(),
                 static_cast<unsigned long long>(last.bytes_up),
                 static_cast<unsigned long long>(last.bytes_down));
  }
  return 0;
}

}  // namespace edgesgd::cli
