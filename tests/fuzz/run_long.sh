#!/usr/bin/env bash
# Runs the fuzz targets for longer than their ctest tests (docs/testing.md#fuzzing), one after
# the other, and prints each one's executions and coverage:
#   tests/fuzz/run_long.sh [TARGET...]      (default: every target; names as in corpus/)
# Environment:
#   EDGESGD_FUZZ_SECONDS   seconds per target (default 600)
#   EDGESGD_FUZZ_BUILD     the build directory with the fuzz_* programs (default
#                          build/asan-clang, the asan preset's)
#   EDGESGD_FUZZ_WORK      where corpora grow and findings land (default
#                          $EDGESGD_FUZZ_BUILD/fuzz-long); the grown corpus is kept between runs,
#                          so each run starts where the last one stopped
#   EDGESGD_FUZZ_FLAGS     extra libFuzzer flags (e.g. "-jobs=2 -workers=2", "-use_value_profile=1")
# Build the programs first: cmake --preset asan && cmake --build --preset asan -j2 --target
# fuzz_frame_decoder fuzz_server_session fuzz_worker_session fuzz_auth_record fuzz_checkpoint
# fuzz_idx_reader fuzz_csv_reader fuzz_npy_reader.
# New inputs worth keeping can be merged into the committed seeds with libFuzzer's -merge=1
# (see docs/testing.md). Exits non-zero if any target found something.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${EDGESGD_FUZZ_SECONDS:-600}"
build="${EDGESGD_FUZZ_BUILD:-$root/build/asan-clang}"
work="${EDGESGD_FUZZ_WORK:-$build/fuzz-long}"
read -r -a flags <<<"${EDGESGD_FUZZ_FLAGS:-}"

targets=("$@")
if ((${#targets[@]} == 0)); then
  for dir in "$here"/corpus/*/; do targets+=("$(basename "$dir")"); done
fi

summaries=()
failed=0
for target in "${targets[@]}"; do
  fuzzer="$build/tests/fuzz/fuzz_$target"
  if [[ ! -x "$fuzzer" ]]; then
    echo "$fuzzer is missing: build it first (see the top of $0)" >&2
    failed=1
    continue
  fi
  echo "=== fuzz_$target for $seconds s ==="
  # run_fuzz_target.sh prints its summary line on stdout, a failure's report on stderr.
  line="$(EDGESGD_FUZZ_KEEP_CORPUS=1 "$here/run_fuzz_target.sh" "$fuzzer" "$here/corpus/$target" \
            "$work/$target" "$seconds" "${flags[@]}")"
  status=$?
  echo "$line"
  if ((status != 0)); then
    summaries+=("$line  FAILED: see $work/$target/fuzz.log and $work/$target/artifacts/")
    failed=1
  else
    summaries+=("$line")
  fi
done

echo "=== summary ($seconds s per target) ==="
printf '%s\n' "${summaries[@]}"
exit "$failed"
