"""CHOCO-SGD (compressed gossip with public copies) against dense D-PSGD, and against compressed
gossip that keeps no public copies."""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import at_round, final, fmt, mean  # noqa: E402

TITLE = "I: CHOCO-SGD compressed gossip vs dense D-PSGD on a ring of 16"
CLAIM = (
    "Koloskova, Stich & Jaggi (ICML 2019, CHOCO-SGD), docs/algorithms.md §6: peers that gossip "
    "compressed differences against public copies of their models train as well as exact "
    "gossip for a small fraction of the bytes, and the copies are what makes this work: "
    "compressing the models themselves (the paper's naive compressed gossip, here "
    "`--no-public-copies`: copies reset to zero every round) does not converge with an "
    "aggressive compressor. Checked on a ring of 16 peers (weights 1/3), iid Fashion-MNIST "
    "softmax regression, batch 32, the same lr 0.05 and 5,000 rounds for every run (dense "
    "D-PSGD gained 0.4 points between rounds 3,000 and 5,000 in a trial run of seed 1), "
    "10 Mbit/s links, 3 seeds, each codec's default consensus step (top_k 0.05, sign 0.5). "
    "Claims: CHOCO with top_k 1 % and CHOCO with sign each end within 1 point of dense "
    "D-PSGD's final accuracy, send at least 20x fewer bytes per peer, and reach 80 % test "
    "accuracy (first evaluation at or above it; evaluations every 25 rounds) in at least 5x "
    "less simulated time. Criterion for the run without public copies, fixed before it ran: it "
    "diverges or stalls if in every seed its final loss is not finite, its final accuracy is "
    "below 50 %, or its final loss is not below its loss at round 100; the claim also needs "
    "CHOCO with top_k 1 % within 1 point of dense D-PSGD. The criterion scores the peers' "
    "average model; the figures add the consensus distance mean_i ||x_i - mean x||^2, which "
    "it does not use."
)

SEEDS = [1, 2, 3]
DENSE = "dense D-PSGD"
CHOCO_TOP_K = "CHOCO top_k 1%"
CHOCO_SIGN = "CHOCO sign"
NO_COPIES = "top_k 1% without public copies"
RUNS = [
    (DENSE, ["--gossip", "dpsgd"], SEEDS),
    (CHOCO_TOP_K, ["--gossip", "choco", "--codec", "top_k", "--k-ratio", "0.01"], SEEDS),
    (CHOCO_SIGN, ["--gossip", "choco", "--codec", "sign"], SEEDS),
    (NO_COPIES, ["--gossip", "choco", "--codec", "top_k", "--k-ratio", "0.01",
                 "--no-public-copies"], SEEDS),
]

PLOTS = [
    {"x": "bytes_up", "y": "accuracy", "xlabel": "bytes sent per peer (log scale)",
     "ylabel": "test accuracy of the average model", "logx": True, "logy": False},
    {"x": "time_s", "y": "accuracy", "xlabel": "simulated seconds (log scale)",
     "ylabel": "test accuracy of the average model", "logx": True, "logy": False},
    {"x": "round", "y": "loss", "ylabel": "test loss of the average model (log scale)",
     "logy": True},
    {"x": "round", "y": "consensus", "ylabel": "consensus distance mean_i ||x_i - mean x||^2",
     "logy": True},
]

TARGET = 0.80
ACCURACY_GAP = 0.01  # CHOCO's final accuracy may fall this far below dense D-PSGD's
BYTES_RATIO = 20
TIME_RATIO = 5
STALL_ACCURACY = 0.50
STALL_ROUND = 100


def first_at_target(run):
    """(time_s, round) of the first evaluated row at TARGET accuracy or above; None if none."""
    for row in run["rows"]:
        if row.get("accuracy") is not None and row["accuracy"] >= TARGET:
            return row["time_s"], int(row["round"])
    return None


def to_target(results, label):
    """Mean over seeds of the simulated seconds and of the rounds to TARGET; (None, None) when
    any seed never gets there."""
    reached = [first_at_target(run) for run in results[label]]
    if any(hit is None for hit in reached):
        return None, None
    return mean([hit[0] for hit in reached]), mean([hit[1] for hit in reached])


def diverged_or_stalled(run):
    """The criterion for the run without public copies, per seed (see CLAIM)."""
    final_row = run["summary"]["final"]
    loss, accuracy = final_row.get("loss"), final_row.get("accuracy")
    early = next((row.get("loss") for row in run["rows"]
                  if row.get("round") is not None and int(row["round"]) == STALL_ROUND), None)
    if loss is None or not math.isfinite(loss):
        return True
    if accuracy is None or accuracy < STALL_ACCURACY:
        return True
    return early is not None and math.isfinite(early) and loss >= early


def significant(value):
    """Three significant digits, or n/a."""
    return "n/a" if value is None else f"{value:.3g}"


def evaluate(results):
    labels = [label for label, _, _ in RUNS]
    accuracy = {label: mean(final(results, label, "accuracy")) for label in labels}
    sent = {label: mean(final(results, label, "bytes_up")) for label in labels}
    timing = {label: to_target(results, label) for label in labels}
    accuracies = "final accuracy - " + "; ".join(
        f"{label}: {fmt(accuracy[label], 4)}" for label in labels)
    seconds = f"simulated s (rounds) to {TARGET:.0%} - " + "; ".join(
        f"{label}: never" if timing[label][0] is None
        else f"{label}: {timing[label][0]:.2f} ({timing[label][1]:.0f})" for label in labels)

    claims = []
    dense_seconds = timing[DENSE][0]
    for label in (CHOCO_TOP_K, CHOCO_SIGN):
        claims.append((f"{label} ends within 1 point of dense D-PSGD's final accuracy",
                       accuracy[label] is not None and accuracy[DENSE] is not None
                       and accuracy[label] >= accuracy[DENSE] - ACCURACY_GAP, accuracies))
        ratio = sent[DENSE] / sent[label]
        claims.append((f"{label} sends at least {BYTES_RATIO}x fewer bytes per peer",
                       ratio >= BYTES_RATIO,
                       f"MB sent per peer - dense {sent[DENSE] / 1e6:.1f}, {label} "
                       f"{sent[label] / 1e6:.2f} ({ratio:.1f}x fewer)"))
        mine = timing[label][0]
        speedup = (dense_seconds / mine if dense_seconds is not None and mine is not None
                   else None)
        claims.append((f"{label} reaches {TARGET:.0%} in at least {TIME_RATIO}x less simulated "
                       f"time than dense D-PSGD",
                       speedup is not None and speedup >= TIME_RATIO,
                       seconds + (f" ({speedup:.1f}x sooner)" if speedup is not None else "")))

    stalled = [diverged_or_stalled(run) for run in results[NO_COPIES]]
    early = at_round(results, NO_COPIES, STALL_ROUND, "loss")
    losses = final(results, NO_COPIES, "loss")
    per_seed = "; ".join(
        f"seed {seed}: loss {fmt(first, 4)} at round {STALL_ROUND}, final loss {fmt(last, 4)}, "
        f"final accuracy {fmt(run['summary']['final'].get('accuracy'), 4)}"
        for seed, run, first, last in zip(SEEDS, results[NO_COPIES], early, losses))
    spread = "; ".join(
        f"{label}: {significant(mean(at_round(results, label, STALL_ROUND, 'consensus')))} at "
        f"round {STALL_ROUND}, {significant(mean(final(results, label, 'consensus')))} at the end"
        for label in (NO_COPIES, CHOCO_TOP_K, DENSE))
    converges = (accuracy[CHOCO_TOP_K] is not None and accuracy[DENSE] is not None
                 and accuracy[CHOCO_TOP_K] >= accuracy[DENSE] - ACCURACY_GAP)
    claims.append(("without public copies top_k 1 % diverges or stalls in every seed while "
                   "CHOCO with top_k 1 % converges (within 1 point of dense D-PSGD)",
                   all(stalled) and len(stalled) == len(SEEDS) and converges,
                   f"{NO_COPIES} - {per_seed}; {accuracies}; consensus distance (not part "
                   f"of the criterion) - {spread}"))
    return claims
