"""A small CNN on Fashion-MNIST: dense SGD, top_k 1 % with error feedback, and sign with a
majority vote."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "n_cnn: a small CNN on Fashion-MNIST, dense and compressed"
CLAIM = (
    "A convolutional network is where communication compression has to prove itself (every "
    "seed paper evaluates on one): the CNN trained with dense SGD reaches at least 90 % "
    "Fashion-MNIST test accuracy, and top_k 1 % with error feedback and sign with a majority "
    "vote end within 1 point of it with at least 25x fewer uplink bytes. Checked with "
    "conv:16:3,relu,maxpool:2,conv:32:3,relu,maxpool:2,dense:64,relu,dense:10 (56,714 "
    "parameters) over 8 workers, iid shards, batch 32 per worker, momentum 0.9, 4,800 rounds "
    "(about 20 epochs), one seed (2). Learning rates were chosen before the run: dense SGD on "
    "seed 1 at 2,400 rounds (lr 0.01, 0.05, 0.2: 0.2 best, 88.6 %), top_k and Signum on a pilot "
    "(seed 99, 1,200 rounds: dense lr 0.2 87.8 %, top_k lr 0.2 88.0 %, Signum lr 0.002 88.2 % "
    "and 0.0005 88.8 %)."
)

SEEDS = [2]
DENSE = "dense SGD, lr 0.2"
TOP_K = "top_k 1 % + EF, lr 0.2"
SIGN = "sign + majority vote (Signum), lr 0.0005"
RUNS = [
    (DENSE, ["--codec", "identity", "--feedback", "none", "--lr", "0.2"], SEEDS),
    (TOP_K, ["--codec", "top_k", "--k-ratio", "0.01", "--feedback", "ef", "--lr", "0.2"], SEEDS),
    (SIGN, ["--codec", "sign", "--aggregate", "majority", "--optimizer", "signum",
            "--downlink", "aggregate", "--lr", "0.0005"], SEEDS),
]

PLOTS = [{"x": "round", "y": "accuracy", "ylabel": "test accuracy", "logy": False,
          "runs": [label for label, _, _ in RUNS]}]


def evaluate(results):
    accuracy = {label: mean(final(results, label, "accuracy")) for label, _, _ in RUNS}
    up = {label: mean(final(results, label, "bytes_up")) for label, _, _ in RUNS}
    dense = accuracy[DENSE]

    def compressed(label):
        ok = (dense is not None and accuracy[label] is not None and up[label]
              and accuracy[label] >= dense - 0.01 and up[DENSE] / up[label] >= 25)
        ratio = up[DENSE] / up[label] if up[label] else None
        return (f"{label} ends within 1 point of dense with at least 25x fewer uplink bytes", ok,
                f"{fmt(accuracy[label], 4)} against {fmt(dense, 4)}, "
                f"{fmt(up[label] / 1e6)} MB up against {fmt(up[DENSE] / 1e6)} MB "
                f"({fmt(ratio, 1)}x fewer)")

    return [
        ("dense SGD reaches at least 90 % test accuracy", dense is not None and dense >= 0.90,
         f"{fmt(dense, 4)}"),
        compressed(TOP_K),
        compressed(SIGN),
    ]
