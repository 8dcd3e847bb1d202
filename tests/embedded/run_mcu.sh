#!/usr/bin/env bash
# Runs a Cortex-M image on qemu's mps2-an386 (Cortex-M4F) with semihosting and checks how it
# ended: the exit code (semihosting SYS_EXIT_EXTENDED becomes qemu's) and a marker in the output.
# A timeout (20 s, or --timeout S) turns a hang into a failure; the smoke image takes well under
# a second, the training images a few seconds.
#
#   tests/embedded/run_mcu.sh build/cortex-m4/tests/embedded/edgesgd_mcu_smoke.elf
#   tests/embedded/run_mcu.sh --expect-exit 3 --expect "edgesgd: fault:" IMAGE --fault
#
# Options: --expect-exit N (default 0), --expect TEXT (default "EDGESGD-MCU PASS"), --timeout S
# (default 20; a loaded CI machine can slow the emulator several times over), --icount (qemu
# counts instructions: the board's clock advances 1 ns per instruction executed, so an image's
# times become instruction counts, the same on every host). Arguments after IMAGE reach the
# image as its semihosting command line (qemu -append).
set -uo pipefail

expect_exit=0
expect_text="EDGESGD-MCU PASS"
timeout_s=20
icount=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expect-exit) expect_exit=$2; shift 2 ;;
    --expect) expect_text=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --icount) icount=(-icount shift=0); shift ;;
    -*) echo "run_mcu: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [[ $# -lt 1 ]]; then
  echo "usage: $0 [--expect-exit N] [--expect TEXT] [--timeout S] [--icount] IMAGE [ARGS...]" >&2
  exit 2
fi
image=$1
shift
qemu=${QEMU_SYSTEM_ARM:-qemu-system-arm}
append=()
if [[ $# -gt 0 ]]; then append=(-append "$*"); fi

output=$(mktemp)
trap 'rm -f "$output"' EXIT
start_ns=$(date +%s%N)
# stdin from /dev/null: with -nographic qemu would otherwise put a terminal into raw mode.
timeout "$timeout_s" "$qemu" -M mps2-an386 -nographic -monitor none "${icount[@]}" \
  -semihosting-config enable=on,target=native -kernel "$image" "${append[@]}" \
  </dev/null >"$output" 2>&1
status=$?
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
cat "$output"

if [[ $status -eq 124 ]]; then
  echo "run_mcu: FAIL: $image did not finish within $timeout_s s" >&2
  exit 1
fi
if [[ $status -ne $expect_exit ]]; then
  echo "run_mcu: FAIL: $image exited with $status, expected $expect_exit" >&2
  exit 1
fi
if ! grep -qF -- "$expect_text" "$output"; then
  echo "run_mcu: FAIL: $image did not print \"$expect_text\"" >&2
  exit 1
fi
echo "run_mcu: OK: $(basename "$image") ${*:+($*) }exited $status in ${elapsed_ms} ms"
