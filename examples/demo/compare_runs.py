#!/usr/bin/python3
"""Prints a comparison table of `edgesgd simulate` or `edgesgd server` runs from their summary
JSON files.

Usage: compare_runs.py [--time-label TEXT] RUN.json[=LABEL] ...
(the first run is the baseline for the ratios; the time column is "virtual s" unless labelled
otherwise, e.g. "wall s" for runs over TCP)
"""

import json
import sys


def main(argv):
    time_label = "virtual s"
    if len(argv) >= 2 and argv[0] == "--time-label":
        time_label, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for spec in argv:
        path, _, label = spec.partition("=")
        try:
            with open(path) as handle:
                summary = json.load(handle)
        except (OSError, ValueError) as error:
            print(f"compare_runs: cannot read {path}: {error}", file=sys.stderr)
            return 1
        runs.append((label or path, summary["final"]))
    base_up = runs[0][1]["bytes_up"] or 1
    header = f"{'run':<24} {'accuracy':>9} {'loss':>8} {'MB up':>10} {'MB down':>10} " \
             f"{'up vs first':>12} {time_label:>10}"
    print(header)
    print("-" * len(header))
    for label, final in runs:
        accuracy = final["accuracy"]
        accuracy_text = f"{100 * accuracy:8.2f}%" if accuracy is not None else "      n/a"
        ratio = base_up / final["bytes_up"] if final["bytes_up"] else float("inf")
        print(f"{label:<24} {accuracy_text} {final['loss']:8.4f} "
              f"{final['bytes_up'] / 1e6:10.2f} {final['bytes_down'] / 1e6:10.2f} "
              f"{ratio:11.1f}x {final['time_s']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
