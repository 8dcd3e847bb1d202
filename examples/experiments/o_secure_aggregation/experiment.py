"""Secure aggregation of random_block updates with DEF: the masked run against the plain one,
with every device masking with every other (SecAgg) and with four neighbours (SecAgg+)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "o_secure_aggregation: SecAgg and SecAgg+ of compressed updates, against the plain run"
CLAIM = (
    "Bonawitz et al. (CCS 2017, SecAgg) and Bell et al. (CCS 2020, SecAgg+): devices mask their "
    "updates with pairwise masks that cancel in the sum and a self mask the survivors help "
    "remove, so the server learns only the round's sum; the sum is exact, so training is "
    "unchanged. edgesgd masks the compressed update: random_block selects the same coordinates "
    "on every device from the run's seed, so only those values are masked and sent, in 32-bit "
    "fixed point (bound 4, 24 fraction bits for 8 workers). Checked on Fashion-MNIST with the "
    "256-unit MLP (203,530 parameters, 3,181 sent per device and round), 8 workers, "
    "random_block 1/64 with DEF, 600 rounds, 2 seeds. Criteria, fixed before the run (means "
    "over seeds): SecAgg and SecAgg+ (k = 4) each end within 0.5 points of the plain run's test "
    "accuracy; the masked payload is no larger than the plain payload (bits per coordinate; the "
    "plain payload also carries the 4 block starts, which the masked one leaves to the shared "
    "seed); the whole secure uplink (masked inputs, keys, sealed and revealed shares, and their "
    "frames) stays within 10 % of the plain uplink."
)

SEEDS = [1, 2]
PLAIN = "plain (no secure aggregation)"
SECAGG = "SecAgg (every other device)"
SECAGG_PLUS = "SecAgg+ (k = 4 neighbours)"
RUNS = [
    (PLAIN, [], SEEDS),
    (SECAGG, ["--secure-aggregation"], SEEDS),
    (SECAGG_PLUS, ["--secure-aggregation", "--secagg-neighbours", "4"], SEEDS),
]

PLOTS = [
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy (mean over seeds)", "logy": False},
]

ACCURACY_GAP = 0.005
UPLINK_BUDGET = 1.10


def evaluate(results):
    def figure(label, column):
        return mean(final(results, label, column))

    accuracy = {label: figure(label, "accuracy") for label, _, _ in RUNS}
    uplink = {label: figure(label, "bytes_up") for label, _, _ in RUNS}
    bits = {label: figure(label, "bits_per_coord") for label, _, _ in RUNS}
    claims = []
    for label in (SECAGG, SECAGG_PLUS):
        ok = None not in (accuracy[label], accuracy[PLAIN])
        claims.append((
            f"{label} ends within {ACCURACY_GAP * 100:.1f} points of the plain run's accuracy",
            ok and accuracy[label] >= accuracy[PLAIN] - ACCURACY_GAP,
            f"{fmt(accuracy[label], 4)} against {fmt(accuracy[PLAIN], 4)}"
            + (f" ({(accuracy[label] - accuracy[PLAIN]) * 100:+.2f} points)" if ok else "")))
    claims.append((
        "the masked payload is no larger than the plain compressed payload",
        None not in (bits[SECAGG], bits[PLAIN]) and bits[SECAGG] <= bits[PLAIN],
        f"{fmt(bits[SECAGG], 5)} bits per coordinate masked against {fmt(bits[PLAIN], 5)} plain"))

    def ratio(label):
        if None in (uplink[label], uplink[PLAIN]):
            return None
        return uplink[label] / uplink[PLAIN]

    claims.append((
        f"the whole secure uplink stays within {(UPLINK_BUDGET - 1) * 100:.0f} % of the plain "
        f"uplink (SecAgg, 8 devices)",
        ratio(SECAGG) is not None and ratio(SECAGG) <= UPLINK_BUDGET,
        f"SecAgg {fmt(ratio(SECAGG), 4)}x the plain uplink "
        f"({fmt(uplink[SECAGG] / 1e6 if uplink[SECAGG] else None)} MB against "
        f"{fmt(uplink[PLAIN] / 1e6 if uplink[PLAIN] else None)} MB); reference, not a "
        f"criterion: SecAgg+ (k = 4) {fmt(ratio(SECAGG_PLUS), 4)}x"))
    return claims
