#!/usr/bin/env bash
# The edgesgd demo: 8 heterogeneous devices train softmax regression on Fashion-MNIST in the
# simulator (real protocol sessions and frames, virtual time over 10 Mbit/s links), comparing
#   dense SGD            identity codec, 32 bits per coordinate up and down
#   sign + majority vote signSGD with Signum momentum, 1 bit per coordinate up and down
#   top_k + EF           1% of coordinates with error feedback
# It prints a table (accuracy, bytes up and down, virtual time) and writes a plot.
# Installs the Debian packages it needs first. Output goes to build/demo/.
#   EDGESGD_DEMO_ROUNDS   rounds per run (default: examples/demo/simulate.toml's 3000)
#   EDGESGD_DEMO_BINARY   an edgesgd binary to use instead of building build/release's
#   EDGESGD_DEMO_OUT      output directory (default build/demo)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${EDGESGD_DEMO_OUT:-build/demo}"
rounds=()
[[ -n "${EDGESGD_DEMO_ROUNDS:-}" ]] && rounds=(--rounds "$EDGESGD_DEMO_ROUNDS")
source examples/demo/binary.sh
mkdir -p "$out"

# The fleet (examples/demo/simulate.toml) and the three runs (examples/demo/runs.txt).
summaries=()
curves=()
while IFS='|' read -r name label flags; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  echo "demo: running $name ..." >&2
  # shellcheck disable=SC2086 # the flags are words
  "$edgesgd" simulate --config examples/demo/simulate.toml $flags "${rounds[@]}" --quiet \
      --metrics "$out/$name.csv" --summary "$out/$name.json" </dev/null
  summaries+=("$out/$name.json=$label")
  curves+=("$out/$name.csv=$label")
done < examples/demo/runs.txt

/usr/bin/python3 examples/demo/compare_runs.py "${summaries[@]}"
/usr/bin/python3 examples/plot_metrics.py "$out/demo.png" "${curves[@]}" \
    --x bytes_up --title "8 devices, Fashion-MNIST softmax regression"
