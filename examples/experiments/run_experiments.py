#!/usr/bin/python3
"""Runs the reference experiments with `edgesgd simulate`, plots them and
writes examples/experiments/RESULTS.md.

Usage: run_experiments.py [--edgesgd PATH] [--only a,f_detag_ring,...] [--jobs N]
                          [--out DIR] [--results FILE]

Every directory next to this script that holds an experiment.py is one experiment:
  config.toml     base flags of every run (flat TOML read by `edgesgd simulate --config`)
  experiment.py   TITLE, CLAIM, RUNS = [(label, [extra flags], [seeds])], PLOTS = [{"x", "y",
                  "ylabel", "logy", optional "runs": the labels to draw (default all)}],
                  evaluate(results) -> [(claim, passed, figures)]
evaluate() receives results[label] = one {"rows": [...], "summary": {...}} per seed, where rows
are the metrics CSV rows with float cells (None where empty). A claim that does not reproduce is
written down as MISS with its figures; nothing here retries seeds.

Runs with Debian's python3-matplotlib (call /usr/bin/python3, not another interpreter).
"""

import argparse
import concurrent.futures
import csv
import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_EDGESGD = os.path.join(REPO, "build", "release", "examples", "edgesgd")
TABLE_COLUMNS = [  # (summary key, heading, format)
    ("loss", "loss", "{:.4g}"),
    ("accuracy", "accuracy", "{:.2%}"),
    ("dist_to_opt", "log10 dist", "{:.2f}"),
    ("consensus", "consensus", "{:.3g}"),
    ("bytes_up", "MB up", None),
    ("bits_per_coord", "bits/coord", "{:.2f}"),
    ("time_s", "virtual s", "{:.1f}"),
]


class Experiment:
    def __init__(self, directory):
        self.directory = directory
        self.name = os.path.basename(directory)
        spec = importlib.util.spec_from_file_location(
            f"experiment_{self.name}", os.path.join(directory, "experiment.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.module = module
        for attribute in ("TITLE", "CLAIM", "RUNS", "PLOTS", "evaluate"):
            if not hasattr(module, attribute):
                raise ValueError(f"{directory}/experiment.py defines no {attribute}")
        self.config = os.path.join(directory, "config.toml")
        if not os.path.isfile(self.config):
            raise ValueError(f"{directory} has no config.toml")


def discover(only):
    experiments = []
    for entry in sorted(os.listdir(HERE)):
        directory = os.path.join(HERE, entry)
        if not os.path.isfile(os.path.join(directory, "experiment.py")):
            continue
        if only and not any(entry == name or entry.startswith(name + "_") for name in only):
            continue
        experiments.append(Experiment(directory))
    return experiments


def parse_cell(cell):
    if cell in ("", None):
        return None
    value = float(cell)
    return None if math.isnan(value) else value


def read_rows(path):
    with open(path, newline="") as handle:
        return [{key: parse_cell(value) for key, value in row.items()}
                for row in csv.DictReader(handle)]


def slug(label):
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").lower()


def run_one(edgesgd, experiment, out_dir, label, flags, seed):
    """Runs one simulation; returns (label, seed, result dict or None, error text or None)."""
    stem = os.path.join(out_dir, f"{slug(label)}_s{seed}")
    command = [edgesgd, "simulate", "--config", experiment.config, *flags, "--seed", str(seed),
               "--metrics", stem + ".csv", "--summary", stem + ".json", "--quiet"]
    started = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if completed.returncode != 0:
        reason = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return label, seed, None, f"exit {completed.returncode}: {reason}\n  $ {shlex.join(command)}"
    with open(stem + ".json") as handle:
        summary = json.load(handle)
    return label, seed, {"rows": read_rows(stem + ".csv"), "summary": summary,
                         "wall_s": elapsed}, None


def mean_series(runs, x, y):
    """Mean of column y over seeds, aligned by row, with x from the first seed."""
    length = min(len(run["rows"]) for run in runs)
    xs, ys = [], []
    for index in range(length):
        x_value = runs[0]["rows"][index].get(x)
        values = [run["rows"][index].get(y) for run in runs]
        values = [v for v in values if v is not None and math.isfinite(v)]
        if x_value is None or not values:
            continue
        xs.append(x_value)
        ys.append(sum(values) / len(values))
    return xs, ys


def plot(experiment, results, plot_dir):
    paths = []
    for number, spec in enumerate(experiment.module.PLOTS, start=1):
        figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=80)
        for label, _, _ in experiment.module.RUNS:
            if label not in results or label not in spec.get("runs", [label]):
                continue
            xs, ys = mean_series(results[label], spec["x"], spec["y"])
            if xs:
                axes.plot(xs, ys, label=label)
        if spec.get("logy"):
            axes.set_yscale("log")
        if spec.get("logx"):
            axes.set_xscale("log")
        axes.set_xlabel(spec.get("xlabel", spec["x"]))
        axes.set_ylabel(spec.get("ylabel", spec["y"]))
        axes.set_title(experiment.module.TITLE, fontsize=9)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
        figure.tight_layout()
        path = os.path.join(plot_dir, f"{experiment.name}_{number}.png")
        figure.savefig(path)
        plt.close(figure)
        paths.append(path)
    return paths


def format_value(key, template, values):
    values = [v for v in values if v is not None and (not isinstance(v, float) or
                                                      math.isfinite(v))]
    if not values:
        return ""
    mean = sum(values) / len(values)
    if key == "bytes_up":
        return f"{mean / 1e6:.3f}"
    return template.format(mean)


def markdown_section(experiment, results, errors, claims, plots, wall_s, results_dir):
    lines = [f"## {experiment.module.TITLE}", "", experiment.module.CLAIM.strip(), "",
             f"Config: `examples/experiments/{experiment.name}/config.toml`; "
             f"wall time {wall_s:.0f} s.", ""]
    header = "| run | seeds | " + " | ".join(h for _, h, _ in TABLE_COLUMNS) + " |"
    lines += [header, "|" + "---|" * (2 + len(TABLE_COLUMNS))]
    for label, flags, seeds in experiment.module.RUNS:
        runs = results.get(label, [])
        cells = [format_value(key, template, [run["summary"]["final"].get(key) for run in runs])
                 for key, _, template in TABLE_COLUMNS]
        flag_text = " ".join(flags)
        lines.append(f"| {label} (`{flag_text}`) | {len(runs)}/{len(seeds)} | " +
                     " | ".join(cells) + " |")
    lines.append("")
    for text in errors:
        lines.append(f"- **ERROR** {text}")
    for claim, passed, figures in claims:
        lines.append(f"- **{'PASS' if passed else 'MISS'}** {claim} — {figures}")
    lines.append("")
    for path in plots:
        lines.append(f"![{experiment.name}]({os.path.relpath(path, results_dir)})")
    lines.append("")
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edgesgd", default=DEFAULT_EDGESGD, help="the edgesgd binary")
    parser.add_argument("--only", default="", help="comma-separated experiment names or letters")
    parser.add_argument("--jobs", type=int, default=2, help="simulations run in parallel")
    parser.add_argument("--out", default=os.path.join(REPO, "build", "experiments"),
                        help="where metrics CSVs and summaries go")
    parser.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"),
                        help="the markdown report to write")
    args = parser.parse_args(argv)
    if not os.access(args.edgesgd, os.X_OK):
        print(f"run_experiments: no edgesgd binary at {args.edgesgd} (build the release preset "
              "or pass --edgesgd)", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("run_experiments: --jobs must be at least 1", file=sys.stderr)
        return 2
    only = [name for name in args.only.split(",") if name]
    try:
        experiments = discover(only)
    except (OSError, ValueError, SyntaxError) as error:
        print(f"run_experiments: {error}", file=sys.stderr)
        return 2
    if not experiments:
        print(f"run_experiments: no experiment matches --only {args.only}", file=sys.stderr)
        return 2

    results_dir = os.path.dirname(os.path.abspath(args.results))
    plot_dir = os.path.join(results_dir, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    command = "python3 examples/experiments/run_experiments.py" + (
        f" --only {args.only}" if args.only else "") + f" --jobs {args.jobs}"
    report = ["# edgesgd reference experiments", "",
              f"Regenerated by `{command}` (Release build). "
              "Each section states the paper's claim, the runs (final-row figures averaged over "
              "seeds) and whether the claim reproduced here: MISS lines are honest misses, with "
              "the figures.", ""]
    summary_lines = []
    any_error = False
    for experiment in experiments:
        out_dir = os.path.join(args.out, experiment.name)
        os.makedirs(out_dir, exist_ok=True)
        print(f"run_experiments: {experiment.name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        results, errors = {}, []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, args.edgesgd, experiment, out_dir, label, flags, seed)
                       for label, flags, seeds in experiment.module.RUNS for seed in seeds]
            for future in futures:
                label, seed, result, error = future.result()
                if error:
                    errors.append(f"{label} seed {seed}: {error}")
                else:
                    results.setdefault(label, []).append(result)
        wall_s = time.monotonic() - started
        claims = []
        if errors:
            any_error = True
        else:
            try:
                claims = experiment.module.evaluate(results)
            except Exception as error:  # a broken evaluate() is reported, not fatal to the rest
                errors.append(f"evaluate() failed: {type(error).__name__}: {error}")
                any_error = True
        plots = plot(experiment, results, plot_dir) if results else []
        report += markdown_section(experiment, results, errors, claims, plots, wall_s,
                                   results_dir)
        passed = sum(1 for _, ok, _ in claims if ok)
        summary_lines.append(f"{experiment.name}: {passed}/{len(claims)} claims reproduced, "
                             f"{len(errors)} errors, {wall_s:.0f} s")
        print(f"run_experiments: {summary_lines[-1]}", file=sys.stderr, flush=True)

    with open(args.results, "w") as handle:
        handle.write("\n".join(report).rstrip() + "\n")
    print("\n".join(summary_lines))
    print(f"wrote {args.results}")
    return 1 if any_error else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
