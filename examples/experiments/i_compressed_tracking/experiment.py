"""BEER (compressed gradient tracking) against CHOCO-SGD with the same compressor, and against
dense gradient tracking and dense D-PSGD, on heterogeneous data."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import fmt, mean  # noqa: E402

TITLE = "I2: BEER compressed gradient tracking vs CHOCO-SGD on heterogeneous linear regression"
CLAIM = (
    "Zhao, Li, Richtárik & Chi (2022, BEER), docs/algorithms.md §6: compressing both the model "
    "and the gradient tracker against public copies keeps gradient tracking's immunity to data "
    "heterogeneity, where compressed D-PSGD (CHOCO-SGD) keeps D-PSGD's heterogeneity bias. "
    "Checked on experiment F's generator (heterogeneous linear regression, 12 peers on a ring "
    "with weights 1/3, d = 100, full local gradients, lr 0.02), 3,000 rounds for every run, "
    "2 seeds. BEER and CHOCO both send top_k 10 % deltas with consensus step 0.2, chosen once "
    "from a pilot on seed 99 (not one of the experiment's seeds): BEER with the sparsifiers' "
    "default 0.05 converged too slowly there (log10 distance -1.1 after 3,000 rounds), 0.2 "
    "reached -10.7, 0.5 diverged; CHOCO gets the same 0.2 (its floor on that seed: +0.17, "
    "+0.68 with 0.05). Metric: log10 ||mean_i x_i - x*||^2. Criteria, fixed before the run: "
    "BEER top_k 10 % ends below -6 in every seed and at least 4 below CHOCO (mean of seeds); "
    "CHOCO top_k 10 % stays at a floor — its mean final value above -2 and within 0.5 of its "
    "value at half the rounds; BEER sends at least 2x fewer bytes per peer than dense gradient "
    "tracking over the same rounds. Dense gradient tracking and dense D-PSGD are references."
)

SEEDS = [1, 2]
BEER = "BEER top_k 10%"
CHOCO = "CHOCO top_k 10%"
GT = "dense gradient tracking"
DPSGD = "dense D-PSGD"
GAMMA = "0.2"
RUNS = [
    (BEER, ["--gossip", "beer", "--codec", "top_k", "--k-ratio", "0.1", "--consensus-step",
            GAMMA], SEEDS),
    (CHOCO, ["--gossip", "choco", "--codec", "top_k", "--k-ratio", "0.1", "--consensus-step",
             GAMMA], SEEDS),
    (GT, ["--gossip", "gt"], SEEDS),
    (DPSGD, ["--gossip", "dpsgd"], SEEDS),
]

PLOTS = [
    {"x": "round", "y": "dist_to_opt", "ylabel": "log10 ||mean x - x*||^2", "logy": False},
    {"x": "bytes_up", "y": "dist_to_opt", "xlabel": "bytes sent per peer (log scale)",
     "ylabel": "log10 ||mean x - x*||^2", "logx": True, "logy": False},
]

CONVERGED = -6.0
MARGIN = 4.0
FLOOR = -2.0
FLOOR_DRIFT = 0.5
BYTES_RATIO = 2.0


def _final(results, label, column):
    """The last evaluated `column` of every seed of `label`."""
    values = []
    for run in results.get(label, []):
        rows = [row for row in run["rows"] if row.get(column) is not None]
        values.append(rows[-1][column] if rows else None)
    return values


def _halfway(results, label, column):
    """`column` at the last evaluated row within the first half of the rounds, per seed."""
    values = []
    for run in results.get(label, []):
        rows = [row for row in run["rows"] if row.get(column) is not None]
        if not rows:
            values.append(None)
            continue
        half = rows[-1]["round"] / 2
        within = [row for row in rows if row["round"] <= half]
        values.append(within[-1][column] if within else None)
    return values


def _bytes_to(results, label, threshold):
    """Mean over seeds of bytes_up at the first evaluation below `threshold`; None when a seed
    never gets there."""
    reached = []
    for run in results.get(label, []):
        hit = next((row["bytes_up"] for row in run["rows"]
                    if row.get("dist_to_opt") is not None and row["dist_to_opt"] < threshold),
                   None)
        if hit is None:
            return None
        reached.append(hit)
    return mean(reached)


def evaluate(results):
    labels = [label for label, _, _ in RUNS]
    final = {label: _final(results, label, "dist_to_opt") for label in labels}
    final_mean = {label: mean(final[label]) for label in labels}
    half = {label: mean(_halfway(results, label, "dist_to_opt")) for label in labels}
    sent = {label: mean(_final(results, label, "bytes_up")) for label in labels}
    figures = ("final log10 ||x - x*||^2 per seed - " + "; ".join(
        f"{label}: " + ", ".join(fmt(value, 2) for value in final[label]) for label in labels)
        + f" (at half the rounds: {CHOCO} {fmt(half[CHOCO], 2)}, {DPSGD} {fmt(half[DPSGD], 2)})")
    megabytes = "MB sent per peer - " + ", ".join(
        f"{label} {(sent[label] or 0) / 1e6:.2f}" for label in labels)

    beer, choco = final_mean[BEER], final_mean[CHOCO]
    claims = []
    claims.append((f"BEER top_k 10 % converges to the optimum: log10 distance below "
                   f"{CONVERGED:.0f} in every seed and at least {MARGIN:.0f} below CHOCO top_k "
                   f"10 %'s",
                   len(final[BEER]) == len(SEEDS)
                   and all(value is not None and value < CONVERGED for value in final[BEER])
                   and beer is not None and choco is not None and beer < choco - MARGIN,
                   figures))
    claims.append((f"CHOCO top_k 10 % stays at its heterogeneity floor: log10 distance above "
                   f"{FLOOR:.0f} and moving less than {FLOOR_DRIFT} over the second half of the "
                   f"rounds",
                   choco is not None and half[CHOCO] is not None and choco > FLOOR
                   and abs(choco - half[CHOCO]) < FLOOR_DRIFT, figures))
    ratio = (sent[GT] / sent[BEER]) if sent[GT] and sent[BEER] else None
    # Not part of the criterion: per byte, the rounds matter too.
    to_converge = "; MB per peer to first reach log10 distance " + f"{CONVERGED:.0f} (not part of " + \
        "the criterion) - " + ", ".join(
            f"{label} " + ("never" if _bytes_to(results, label, CONVERGED) is None
                           else f"{_bytes_to(results, label, CONVERGED) / 1e6:.2f}")
            for label in (BEER, GT))
    claims.append((f"BEER top_k 10 % sends at least {BYTES_RATIO:.0f}x fewer bytes per peer than "
                   f"dense gradient tracking over the same rounds",
                   ratio is not None and ratio >= BYTES_RATIO,
                   megabytes + (f" ({ratio:.1f}x fewer)" if ratio is not None else "")
                   + to_converge))
    return claims
