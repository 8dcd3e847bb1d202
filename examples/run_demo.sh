#!/usr/bin/env bash
# The edgesgd demo: 8 heterogeneous devices train softmax regression on Fashion-MNIST in the
# simulator (real protocol sessions and frames, virtual time over 10 Mbit/s links), comparing
#   dense SGD            identity codec, 32 bits per coordinate up and down
#   sign + majority vote signSGD with Signum momentum, 1 bit per coordinate up and down
#   top_k + EF           1% of coordinates with error feedback
# It prints a table (accuracy, bytes up and down, virtual time) and writes a plot.
# Installs the Debian packages it needs first. Output goes to build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${EDGESGD_JOBS:-2}"
out="build/demo"
cmake/install-debian-deps.sh host
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs" --target edgesgd
edgesgd=build/release/examples/edgesgd
mkdir -p "$out"

# Heterogeneous fleet: compute speeds cycle over the 8 devices, every link 10 Mbit/s, 20 ms.
common=(--task softmax --data fashion-mnist --workers 8 --rounds 3000 --batch 32 --seed 1
        --device-speeds 1,1,0.5,0.5,0.25,2,1,1 --bandwidth-mbps 10 --latency-ms 20
        --eval-every 100 --quiet)

run() {
  local name="$1"; shift
  echo "demo: running $name ..." >&2
  "$edgesgd" simulate "${common[@]}" "$@" --metrics "$out/$name.csv" --summary "$out/$name.json"
}
run dense --codec identity --optimizer momentum --momentum 0.9 --lr 0.05
run sign_majority --codec sign --aggregate majority --optimizer signum --momentum 0.9 \
    --lr 0.001 --downlink aggregate
run top_k_ef --codec top_k --k-ratio 0.01 --feedback ef --optimizer sgd --lr 0.5

/usr/bin/python3 examples/demo/compare_runs.py "$out/dense.json=dense SGD" \
    "$out/sign_majority.json=sign + majority vote" "$out/top_k_ef.json=top_k 1% + EF"
/usr/bin/python3 examples/plot_metrics.py "$out/demo.png" "$out/dense.csv=dense SGD" \
    "$out/sign_majority.csv=sign + majority vote" "$out/top_k_ef.csv=top_k 1% + EF" \
    --x bytes_up --title "8 devices, Fashion-MNIST softmax regression"
