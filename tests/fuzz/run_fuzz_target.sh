#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time on its seed corpus, then prints a one-line summary:
#   run_fuzz_target.sh FUZZER SEED_CORPUS WORK_DIR SECONDS [libFuzzer flags...]
# The seed corpus is only read: new inputs go to WORK_DIR/corpus (emptied first unless
# EDGESGD_FUZZ_KEEP_CORPUS=1), crashes, hangs and out-of-memory inputs to WORK_DIR/artifacts/.
# Limits: 10 s per input (a hang is a failure), 2 GiB of RSS. Exits non-zero when the fuzzer
# found anything.
set -uo pipefail

if (($# < 4)); then
  echo "usage: $0 FUZZER SEED_CORPUS WORK_DIR SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer="$1"
seeds="$2"
work="$3"
seconds="$4"
shift 4
name="$(basename "$fuzzer")"

if [[ "${EDGESGD_FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then
  rm -rf "$work/corpus"
fi
rm -rf "$work/artifacts"
mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"

"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds" \
  >"$log" 2>&1
status=$?

# The final "#N DONE cov: C ft: F corp: ..." line (or the last status line of a crashed run).
last="$(grep -E '^#[0-9]+' "$log" | tail -1)"
execs="$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)"
rate="$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log" | tail -1)"
cov="$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")"
ft="$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")"
corp="$(sed -nE 's/.* corp: ([0-9]+)\/([0-9]+[a-zA-Z]*).*/\1 inputs, \2/p' <<<"$last")"
echo "$name: ${execs:-?} execs (${rate:-?}/s) in ${seconds} s, coverage ${cov:-?} edges," \
     "${ft:-?} features, corpus ${corp:-?}"

if ((status != 0)); then
  echo "$name FAILED (exit $status); libFuzzer's report:" >&2
  grep -v -E '^#[0-9]+' "$log" | tail -60 >&2
  for artifact in "$work"/artifacts/*; do
    [[ -e "$artifact" ]] && echo "reproduce with: $fuzzer $artifact" >&2
  done
fi
exit "$status"
