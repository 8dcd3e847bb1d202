"""Buffered asynchronous aggregation (FedBuff) against synchronous FedAvg on a fleet with
heavy-tailed speeds: simulated time to 80 % test accuracy, dense and top_k 1 % + EF."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import fmt, mean  # noqa: E402

TITLE = "j_async: FedBuff against synchronous FedAvg on a heavy-tailed fleet"
CLAIM = (
    "Nguyen et al. (AISTATS 2022, FedBuff): with device speeds that vary as much as real fleets', "
    "buffered asynchronous aggregation reaches a target accuracy in less wall time than "
    "synchronous rounds, which wait for their slowest device (the paper reports 3.3x). Checked "
    "on Fashion-MNIST softmax regression, 100 workers with lognormal(sigma 1) compute speeds, "
    "10 % of them training at a time (FedAvg samples 10 per round; FedBuff keeps 10 busy), 5 "
    "local SGD steps of batch 32 at lr 0.1, staleness weight 1/sqrt(1 + tau), 3 seeds; dense "
    "updates and top_k 1 % with error feedback. The buffer was not tuned: K = 10 updates per "
    "model version, as many as a FedAvg round averages. A pilot (seed 99, not one of the seeds) "
    "gave times to 80 % of 6.9 s (FedAvg) and 2.0 s (FedBuff K = 10) dense, 14.3 s and 4.8 s with "
    "top_k; smaller buffers (K = 5, 2) are reported beside it. Criterion, fixed before the run: "
    "FedBuff with K = 10 reaches 80 % test accuracy in at most half the simulated time of FedAvg, "
    "dense and with top_k + EF, in the mean over seeds and in every seed."
)

SEEDS = [1, 2, 3]
TARGET = 0.80
CODECS = [
    ("dense", ["--codec", "identity", "--feedback", "none"], 300),
    ("top_k 1 % + EF", ["--codec", "top_k", "--k-ratio", "0.01", "--feedback", "ef"], 400),
]
BUFFERS = [10, 5, 2]


def _fedavg(codec):
    return f"FedAvg, {codec}"


def _fedbuff(codec, buffer):
    return f"FedBuff K={buffer}, {codec}"


RUNS = []
for codec, flags, rounds in CODECS:
    RUNS.append((_fedavg(codec), flags + ["--rounds", str(rounds)], SEEDS))
    # The same simulated time or more: a version takes far less time than a round.
    RUNS += [(_fedbuff(codec, buffer),
              flags + ["--buffer", str(buffer), "--rounds", str(rounds * 10 // buffer)], SEEDS)
             for buffer in BUFFERS]

PLOTS = [{"x": "time_s", "y": "accuracy", "ylabel": f"test accuracy, {codec} (mean over seeds)",
          "logy": False,
          "runs": [_fedavg(codec)] + [_fedbuff(codec, buffer) for buffer in BUFFERS]}
         for codec, _, _ in CODECS]


def _time_to_target(results, label):
    """Simulated seconds at the first evaluation at or above TARGET, per seed (None: never)."""
    times = []
    for run in results[label]:
        reached = None
        for row in run["rows"]:
            if row.get("accuracy") is not None and row["accuracy"] >= TARGET:
                reached = row["time_s"]
                break
        times.append(reached)
    return times


def _times(values):
    return ", ".join(fmt(value, 2) for value in values)


def evaluate(results):
    outcomes = []
    for codec, _, _ in CODECS:
        fedavg = _time_to_target(results, _fedavg(codec))
        buffered = {buffer: _time_to_target(results, _fedbuff(codec, buffer)) for buffer in BUFFERS}
        chosen = buffered[BUFFERS[0]]
        every_seed = all(a is not None and s is not None and 2 * a <= s
                         for a, s in zip(chosen, fedavg))
        fedavg_mean, chosen_mean = mean(fedavg), mean(chosen)
        ratio = fedavg_mean / chosen_mean if fedavg_mean and chosen_mean else None
        passed = every_seed and ratio is not None and ratio >= 2
        others = "; ".join(f"K={buffer}: {_times(buffered[buffer])} s"
                           for buffer in BUFFERS[1:])
        outcomes.append((
            f"{codec}: FedBuff K=10 reaches {TARGET:.0%} accuracy in at most half FedAvg's "
            "simulated time (mean over seeds, and in every seed)",
            passed,
            f"seconds to {TARGET:.0%} per seed: FedAvg {_times(fedavg)}, FedBuff K=10 "
            f"{_times(chosen)} (ratio of means {fmt(ratio, 2)}); {others}"))
    return outcomes
