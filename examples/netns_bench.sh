#!/usr/bin/env bash
# Wall time to a target accuracy over emulated edge links: an `edgesgd server` and N workers,
# each worker in its own network namespace behind a veth pair shaped with tc (token bucket at
# --rate, netem delay) — real kernels, real TCP, real congestion control — training softmax
# regression on Fashion-MNIST three ways: dense SGD, sign + majority vote, top_k 1% + EF (both
# compressed runs broadcast a compressed aggregate: the 1-bit vote, and top_k of the mean with
# the server's own error feedback). Prints, per run: seconds to the target accuracy counted from
# the end of the first round (training) and from the server's start (wall), the training speed-up over
# dense, final accuracy and bytes.
#
# Needs root (ip netns, tc from iproute2). Cleans up its namespaces on exit. ctest runs it as
# `tcp_netns_bench` with EDGESGD_NETNS_CHECK=1: then a machine that cannot create namespaces or
# shape links skips (exit 77), and a run that never reaches the target fails; the figures are
# printed, never judged (they depend on the machine's load).
#   EDGESGD_NETNS_WORKERS (8)  EDGESGD_NETNS_RATE (10mbit)  EDGESGD_NETNS_DELAY (20ms)
#   EDGESGD_NETNS_ROUNDS (400)  EDGESGD_NETNS_TARGET (0.80)
#   EDGESGD_NETNS_BINARY (build/release/examples/edgesgd)  EDGESGD_NETNS_OUT (build/netns_bench)
set -euo pipefail
cd "$(dirname "$0")/.."

workers="${EDGESGD_NETNS_WORKERS:-8}"
rate="${EDGESGD_NETNS_RATE:-10mbit}"
delay="${EDGESGD_NETNS_DELAY:-20ms}"
rounds="${EDGESGD_NETNS_ROUNDS:-400}"
target="${EDGESGD_NETNS_TARGET:-0.80}"
edgesgd="${EDGESGD_NETNS_BINARY:-$(pwd)/build/release/examples/edgesgd}"
out="${EDGESGD_NETNS_OUT:-$(pwd)/build/netns_bench}"
check="${EDGESGD_NETNS_CHECK:-0}"
prefix="es$$"
port=7000

# Without the means to emulate the links: exit 1 when run by hand, skip (77) as a test.
unavailable() {
  echo "netns_bench: $1" >&2
  exit $([[ $check == 1 ]] && echo 77 || echo 1)
}
[[ $(id -u) -eq 0 ]] || unavailable "needs root (network namespaces and tc)"
command -v ip >/dev/null && command -v tc >/dev/null || unavailable "needs ip and tc (iproute2)"
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
ip netns add "${prefix}s" 2>/dev/null || unavailable "cannot create network namespaces here"
ip -n "${prefix}s" link add br0 type bridge || unavailable "cannot create a bridge here"
ip -n "${prefix}s" addr add 10.77.0.1/24 dev br0
ip -n "${prefix}s" link set br0 up
ip -n "${prefix}s" link set lo up
for i in $(seq "$workers"); do
  ns="${prefix}w$i"
  ip netns add "$ns"
  ip link add "${prefix}a$i" type veth peer name "${prefix}b$i" ||
    unavailable "cannot create veth pairs here"
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
        latency 400ms || unavailable "cannot shape links with tc tbf here"
  done
done

# Every frame is authenticated, as in a deployment: one pre-shared key per device.
"$edgesgd" keygen --devices "$workers" --out "$out/keys" --force

data=(--task softmax --data fashion-mnist --keys "$out/keys")
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
run top_k_ef --codec top_k --k-ratio 0.01 --feedback ef --optimizer sgd --lr 0.5 \
    --downlink aggregate

/usr/bin/python3 - "$target" "$out" <<'EOF'
import csv, json, sys
target, out = float(sys.argv[1]), sys.argv[2]
# Training time counts from the close of round 1: before it, every worker loads its data (it
# learns its shard from the server's Welcome) and receives the full model, the same for every
# codec. Wall time (from the server's start) is shown too.
print(f"seconds to {target:.0%} accuracy")
print(f"{'run':<24} {'train s':>8} {'wall s':>7} {'speed-up':>9} {'final acc':>10} "
      f"{'MB up':>8} {'MB down':>8}")
dense_seconds, missed = None, []
for name, label in (("dense", "dense SGD"), ("sign_majority", "sign + majority vote"),
                    ("top_k_ef", "top_k 1% + EF")):
    summary = json.load(open(f"{out}/{name}.json"))
    started = reached = None
    with open(f"{out}/{name}.csv") as f:
        for row in csv.DictReader(f):
            if row["round"] == "1":
                started = float(row["time_s"])
            if row["accuracy"] and float(row["accuracy"]) >= target:
                reached = float(row["time_s"])
                break
    final = summary["final"]
    if reached is None:
        missed.append(label)
        timing = f"{'never':>8} {'never':>7} {'':>9}"
    else:
        seconds = reached - started
        dense_seconds = dense_seconds or seconds
        timing = f"{seconds:8.2f} {reached:7.2f} {dense_seconds / seconds:8.1f}x"
    print(f"{label:<24} {timing} {100 * final['accuracy']:9.2f}% "
          f"{final['bytes_up'] / 1e6:8.2f} {final['bytes_down'] / 1e6:8.2f}")
if missed:
    sys.exit(f"netns_bench: never reached {target:.0%}: {', '.join(missed)}")
EOF
