#!/usr/bin/python3
"""Plots edgesgd metrics CSVs (one per run) into one PNG comparing the runs.

Usage: plot_metrics.py OUT.png RUN.csv[=LABEL] [RUN.csv[=LABEL] ...] [--x round|time_s|bytes_up]

Each CSV has the header written by `edgesgd simulate` / `edgesgd server`:
round,time_s,loss,accuracy,dist_to_opt,consensus,bytes_up,bytes_down,bits_per_coord
Empty cells mean the figure does not apply; a panel is drawn for every column that has data.
Runs with Debian's python3-matplotlib (call /usr/bin/python3, not another interpreter).
"""

import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = [
    ("loss", "loss", "log"),
    ("accuracy", "test accuracy", "linear"),
    ("dist_to_opt", "log10 ||x - x*||^2", "linear"),
    ("consensus", "consensus distance", "log"),
    ("bits_per_coord", "bits per coordinate", "linear"),
]
X_AXES = {"round": "round", "time_s": "time (s)", "bytes_up": "uplink bytes (cumulative)"}


def read_run(path):
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"round", "time_s", "bytes_up"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: not an edgesgd metrics file (missing {sorted(missing)})")
        rows = list(reader)
    series = {}
    for name in ["round", "time_s", "bytes_up"] + [c for c, _, _ in COLUMNS]:
        values = []
        for row in rows:
            cell = row.get(name, "")
            values.append(float(cell) if cell not in ("", None) else math.nan)
        series[name] = values
    return series


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("runs", nargs="+", help="CSV path, optionally =LABEL")
    parser.add_argument("--x", choices=sorted(X_AXES), default="round")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)

    runs = []
    for spec in args.runs:
        path, _, label = spec.partition("=")
        try:
            runs.append((label or os.path.splitext(os.path.basename(path))[0], read_run(path)))
        except (OSError, ValueError) as error:
            print(f"plot_metrics: {error}", file=sys.stderr)
            return 1

    panels = [c for c in COLUMNS
              if any(not math.isnan(v) for _, s in runs for v in s[c[0]])]
    if not panels:
        print("plot_metrics: no plottable column in the given files", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for axis, (column, title, scale) in zip(axes[0], panels):
        for label, series in runs:
            points = [(x, y) for x, y in zip(series[args.x], series[column])
                      if not math.isnan(y) and not math.isnan(x)]
            if points:
                axis.plot([p[0] for p in points], [p[1] for p in points], label=label)
        axis.set_xlabel(X_AXES[args.x])
        axis.set_title(title)
        if scale == "log" and all(p > 0 for _, s in runs for p in s[column] if not math.isnan(p)):
            axis.set_yscale("log")
        axis.grid(alpha=0.3)
    axes[0][0].legend()
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot_metrics: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
