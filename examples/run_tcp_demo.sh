#!/usr/bin/env bash
# The edgesgd demo over real TCP: an `edgesgd server` and 8 `edgesgd worker` processes on
# loopback train softmax regression on Fashion-MNIST, comparing the simulator demo's three runs
# (examples/run_demo.sh, listed in examples/demo/runs.txt):
#   dense SGD            identity codec, 32 bits per coordinate up and down
#   sign + majority vote signSGD with Signum momentum, 1 bit per coordinate up and down
#   top_k + EF           1% of coordinates with error feedback
# and prints the same table, with wall-clock seconds. Frames are authenticated with a key file
# `edgesgd keygen` writes. Output goes to build/tcp_demo/.
#   EDGESGD_DEMO_ROUNDS   rounds per run (default 3000, as in the simulator demo)
#   EDGESGD_DEMO_WORKERS  worker processes (default 8)
#   EDGESGD_DEMO_BINARY   an edgesgd binary to use instead of building build/release's
#   EDGESGD_DEMO_OUT      output directory (default build/tcp_demo)
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${EDGESGD_DEMO_ROUNDS:-3000}"
workers="${EDGESGD_DEMO_WORKERS:-8}"
out="${EDGESGD_DEMO_OUT:-build/tcp_demo}"
source examples/demo/binary.sh
mkdir -p "$out"
# Every frame is authenticated with the devices' pre-shared keys, as in a real deployment.
keys="$out/keys"
"$edgesgd" keygen --devices "$workers" --out "$keys" --force

data=(--task softmax --data fashion-mnist)
common=("${data[@]}" --workers "$workers" --rounds "$rounds" --batch 32 --seed 1
        --eval-every 100 --quorum "$workers" --quiet)

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

run() {
  local name="$1"; shift
  echo "tcp demo: running $name ($workers workers, $rounds rounds) ..." >&2
  rm -f "$out/$name.port"
  "$edgesgd" server --listen 127.0.0.1:0 --port-file "$out/$name.port" --keys "$keys" \
      "${common[@]}" "$@" \
      --metrics "$out/$name.csv" --summary "$out/$name.json" 2>"$out/$name.server.log" &
  local server=$!
  pids=("$server")
  for _ in $(seq 200); do [[ -s "$out/$name.port" ]] && break; sleep 0.05; done
  if [[ ! -s "$out/$name.port" ]]; then
    echo "tcp demo: the $name server did not start:" >&2
    cat "$out/$name.server.log" >&2
    exit 1
  fi
  local port
  port=$(cat "$out/$name.port")
  for id in $(seq "$workers"); do
    "$edgesgd" worker --connect "127.0.0.1:$port" --id "$id" --keys "$keys" "${data[@]}" --quiet \
        2>"$out/$name.worker$id.log" &
    pids+=($!)
  done
  wait "$server"
  for pid in "${pids[@]:1}"; do wait "$pid"; done
  pids=()
}
summaries=()
while IFS='|' read -r name label flags; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  # shellcheck disable=SC2086 # the flags are words
  run "$name" $flags
  summaries+=("$out/$name.json=$label")
done < examples/demo/runs.txt

/usr/bin/python3 examples/demo/compare_runs.py --time-label "wall s" "${summaries[@]}"
