#!/usr/bin/python3
"""Pins the metrics CSVs of short versions of the demo's configurations and of every reference
experiment's runs: a refactoring that changes any byte of any of them (a loss, an accuracy, a
byte count) fails this test.

Usage: pinned_metrics.py EDGESGD WORK_DIR PINNED_FILE [--update | --shard I/N]

Each run is the experiment's (or demo's) own flags with --rounds and --eval-every cut down and
its first seed; the CSV's SHA-256 is compared with PINNED_FILE (`ID SHA256` lines). --update
rewrites PINNED_FILE from this build instead (after a deliberate change of results; say why in
the commit). --shard I/N checks runs I, I + N, I + 2N, ... only, so N tests can share the work.
"""

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXPERIMENTS = os.path.join(REPO, "examples", "experiments")
DEMO = os.path.join(REPO, "examples", "demo")
SHORT = ["--rounds", "24", "--eval-every", "8"]


def demo_runs():
    with open(os.path.join(DEMO, "runs.txt")) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _label, flags = line.split("|", 2)
            yield (f"demo/{name}", os.path.join(DEMO, "simulate.toml"), shlex.split(flags), 1)


def experiment_runs():
    for entry in sorted(os.listdir(EXPERIMENTS)):
        path = os.path.join(EXPERIMENTS, entry, "experiment.py")
        if not os.path.isfile(path):
            continue
        spec = importlib.util.spec_from_file_location(f"pinned_{entry}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for label, flags, seeds in module.RUNS:
            slug = "".join(c if c.isalnum() else "_" for c in label).strip("_").lower()
            yield (f"{entry}/{slug}", os.path.join(EXPERIMENTS, entry, "config.toml"), flags,
                   seeds[0])


def parse_shard(text):
    """'I/N' as (I, N) with 0 <= I < N, or None."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    index, count = int(parts[0]), int(parts[1])
    return (index, count) if 0 <= index < count else None


def main(argv):
    update = argv[3:] == ["--update"]
    shard = parse_shard(argv[4]) if len(argv) == 5 and argv[3] == "--shard" else None
    if len(argv) < 3 or not (len(argv) == 3 or update or shard):
        print(__doc__, file=sys.stderr)
        return 2
    edgesgd, work, pinned_file = argv[:3]
    index, count = shard or (0, 1)
    os.makedirs(work, exist_ok=True)
    pinned = {}
    if not update:
        with open(pinned_file) as handle:
            for line in handle:
                if line.strip() and not line.startswith("#"):
                    run_id, digest = line.split()
                    pinned[run_id] = digest
    results = {}
    failures = []
    runs = [*demo_runs(), *experiment_runs()]
    for run_id, config, flags, seed in runs[index::count]:
        csv = os.path.join(work, run_id.replace("/", "__") + ".csv")
        command = [edgesgd, "simulate", "--config", config, *flags, *SHORT, "--seed", str(seed),
                   "--metrics", csv, "--quiet"]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            failures.append(f"{run_id}: exit {completed.returncode}: "
                            f"{completed.stderr.strip()}\n  $ {shlex.join(command)}")
            continue
        with open(csv, "rb") as handle:
            results[run_id] = hashlib.sha256(handle.read()).hexdigest()
        if not update:
            expected = pinned.get(run_id)
            if expected is None:
                failures.append(f"{run_id}: not pinned (run with --update and commit the file)")
            elif expected != results[run_id]:
                failures.append(f"{run_id}: metrics changed ({csv}, pinned {expected[:12]}, "
                                f"now {results[run_id][:12]})\n  $ {shlex.join(command)}")
    if not update and index == 0:
        for run_id in sorted(set(pinned) - {run[0] for run in runs}):
            failures.append(f"{run_id}: pinned but no longer run")
    if update and not failures:
        with open(pinned_file, "w") as handle:
            handle.write("# SHA-256 of the metrics CSV of each pinned run "
                         "(tests/cli/pinned_metrics.py)\n")
            for run_id in sorted(results):
                handle.write(f"{run_id} {results[run_id]}\n")
    for failure in failures:
        print(f"pinned_metrics: {failure}", file=sys.stderr)
    print(f"pinned_metrics: {len(results)} runs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
