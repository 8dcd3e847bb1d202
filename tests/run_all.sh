#!/usr/bin/env bash
# Builds and runs every test of edgesgd, installing the Debian packages it needs first:
#   1. host Release: unit, property, golden-vector, convergence and allocation tests, plus the
#      find_package(edgesgd) consumer and the custom_model example built against an install
#   2. host AddressSanitizer + UndefinedBehaviorSanitizer, built with Clang: the same suites,
#      and the libFuzzer targets of tests/fuzz, 15 s each on their seed corpora
#   3. ARM Linux (aarch64, armhf): the suites cross-compiled and run under qemu-user
#   4. Cortex-M4: core, platform, wire and protocol built bare-metal and checked with nm for
#      heap/exception symbols; a smoke image run under qemu-system-arm
# Set EDGESGD_JOBS to change the build parallelism (default 2) and EDGESGD_STAGES to a subset
# (e.g. "release asan") to run only some stages. A stage whose packages cannot be had is not
# run, the others still are, and the command then exits non-zero naming it.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${EDGESGD_JOBS:-2}"
stages="${EDGESGD_STAGES:-release asan aarch64 armhf cortex-m4}"
log_dir="build/test-logs"

mkdir -p "$log_dir"
# shellcheck disable=SC2086  # the stages are words
cmake/install-debian-deps.sh --unavailable "$log_dir/unavailable-stages" $stages || {
  status=$?
  ((status == 3)) || exit "$status"
}
declare -A not_run=()
while IFS=$'\t' read -r stage reason; do
  not_run[$stage]=$reason
done <"$log_dir/unavailable-stages"

passed=0
failed=0
# Runs ctest for a preset and adds its counts to the totals.
run_ctest() {
  local preset="$1"
  local log="$log_dir/$preset.log"
  local status=0
  ctest --preset "$preset" -j "$jobs" 2>&1 | tee "$log" || status=$?
  local line
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -1 || true)
  if [[ -n "$line" ]]; then
    local fails total
    fails=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
    passed=$((passed + total - fails))
    failed=$((failed + fails))
  elif ((status != 0)); then
    failed=$((failed + 1))
  fi
  return "$status"
}

overall=0
for stage in $stages; do
  if [[ -n ${not_run[$stage]+set} ]]; then
    echo "=== edgesgd tests: $stage: not run (${not_run[$stage]}) ==="
    overall=1
    continue
  fi
  echo "=== edgesgd tests: $stage ==="
  if ! { cmake --preset "$stage" && cmake --build --preset "$stage" -j "$jobs"; }; then
    echo "edgesgd tests: $stage failed to build" >&2
    failed=$((failed + 1)); overall=1
    continue
  fi
  run_ctest "$stage" || overall=1
done

summary="summary: $passed passed, $failed failed"
((${#not_run[@]} == 0)) || summary+="; not run: ${!not_run[*]}"
echo "$summary"
exit "$overall"
