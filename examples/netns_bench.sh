#!/usr/bin/env bash
# Wall time to a target accuracy over emulated edge links: an `edgesgd server` and N workers,
# each worker in its own network namespace behind a veth pair shaped with tc (token bucket at
# --rate, netem delay) — real kernels, real TCP, real congestion control — training softmax
# regression on Fashion-MNIST three ways: dense SGD, sign + majority vote, top_k 1% + EF.
# Prints, per run: wall seconds to the target accuracy, final accuracy and bytes.
#
# Needs root (ip netns, tc); not part of CI, which runs unprivileged. Cleans up its namespaces
# on exit.
#   EDGESGD_NETNS_WORKERS (8)  EDGESGD_NETNS_RATE (10mbit)  EDGESGD_NETNS_DELAY (20ms)
#   EDGESGD_NETNS_ROUNDS (1500)  EDGESGD_NETNS_TARGET (0.80)
set -euo pipefail
cd "$(dirname "$0")/.."

workers="${EDGESGD_NETNS_WORKERS:-8}"
rate="${EDGESGD_NETNS_RATE:-10mbit}"
delay="${EDGESGD_NETNS_DELAY:-20ms}"
rounds="${EDGESGD_NETNS_ROUNDS:-1500}"
target="${EDGESGD_NETNS_TARGET:-0.80}"
edgesgd="$(pwd)/build/release/examples/edgesgd"
out="$(pwd)/build/netns_bench"
prefix="es$$"
port=7000

if [[ $(id -u) -ne 0 ]]; then
  echo "netns_bench: needs root (network namespaces and tc)" >&2
  exit 1
fi
[[ -x "$edgesgd" ]] || { echo "netns_bench: build edgesgd first (cmake --build --preset release)" >&2; exit 1; }
mkdir -p "$out"

cleanup() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT

# The server's namespace holds a bridge; every worker namespace hangs off it by a veth pair
# shaped in both directions (worker side: uplink, bridge side: downlink).
ip netns add "${prefix}s"
ip -n "${prefix}s" link add br0 type bridge
ip -n "${prefix}s" addr add 10.77.0.1/24 dev br0
ip -n "${prefix}s" link set br0 up
ip -n "${prefix}s" link set lo up
for i in $(seq "$workers"); do
  ns="${prefix}w$i"
  ip netns add "$ns"
  ip link add "${prefix}a$i" type veth peer name "${prefix}b$i"
  ip link set "${prefix}a$i" netns "$ns"
  ip link set "${prefix}b$i" netns "${prefix}s"
  ip -n "$ns" addr add "10.77.0.$((10 + i))/24" dev "${prefix}a$i"
  ip -n "$ns" link set "${prefix}a$i" up
  ip -n "$ns" link set lo up
  ip -n "${prefix}s" link set "${prefix}b$i" master br0 up
  for side in "$ns ${prefix}a$i" "${prefix}s ${prefix}b$i"; do
    set -- $side
    # Delay needs sch_netem, which some kernels lack: then the links are rate-limited only.
    if [[ "$delay" != 0 ]] &&
       ip netns exec "$1" tc qdisc add dev "$2" root handle 1: netem delay "$delay" 2>/dev/null; then
      parent=(parent 1: handle 2:)
    else
      [[ "$delay" == 0 || $i -gt 1 ]] ||
        echo "netns_bench: no netem qdisc in this kernel: links are not delayed" >&2
      parent=(root handle 2:)
    fi
    ip netns exec "$1" tc qdisc add dev "$2" "${parent[@]}" tbf rate "$rate" burst 32kbit \
        latency 400ms
  done
done

data=(--task softmax --data fashion-mnist)
common=("${data[@]}" --workers "$workers" --rounds "$rounds" --batch 32 --seed 1
        --eval-every 10 --quorum "$workers" --quiet)

run() {
  local name="$1"; shift
  echo "netns_bench: $name ..." >&2
  ip netns exec "${prefix}s" "$edgesgd" server --listen "10.77.0.1:$port" "${common[@]}" "$@" \
      --metrics "$out/$name.csv" --summary "$out/$name.json" 2>"$out/$name.server.log" &
  local server=$!
  sleep 1
  local pids=()
  for i in $(seq "$workers"); do
    ip netns exec "${prefix}w$i" "$edgesgd" worker --connect "10.77.0.1:$port" --id "$i" \
        "${data[@]}" --quiet 2>"$out/$name.worker$i.log" &
    pids+=($!)
  done
  wait "$server"
  for pid in "${pids[@]}"; do wait "$pid"; done
  port=$((port + 1))
}
run dense --codec identity --optimizer momentum --momentum 0.9 --lr 0.05
run sign_majority --codec sign --aggregate majority --optimizer signum --momentum 0.9 \
    --lr 0.001 --downlink aggregate
run top_k_ef --codec top_k --k-ratio 0.01 --feedback ef --optimizer sgd --lr 0.5

/usr/bin/python3 - "$target" "$out" <<'EOF'
import csv, json, sys
target, out = float(sys.argv[1]), sys.argv[2]
print(f"{'run':<24} {'s to ' + format(target, '.0%'):>10} {'final acc':>10} {'MB up':>9} "
      f"{'MB down':>9} {'wall s':>8}")
for name, label in (("dense", "dense SGD"), ("sign_majority", "sign + majority vote"),
                    ("top_k_ef", "top_k 1% + EF")):
    reached = "never"
    with open(f"{out}/{name}.csv") as f:
        for row in csv.DictReader(f):
            if row["accuracy"] and float(row["accuracy"]) >= target:
                reached = f"{float(row['time_s']):.1f}"
                break
    final = json.load(open(f"{out}/{name}.json"))["final"]
    print(f"{label:<24} {reached:>10} {100 * final['accuracy']:9.2f}% "
          f"{final['bytes_up'] / 1e6:9.2f} {final['bytes_down'] / 1e6:9.2f} "
          f"{final['time_s']:8.1f}")
EOF
