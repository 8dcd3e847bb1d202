#!/usr/bin/env bash
# Proves check_symbols.sh can fail: run on a library that references the heap, exceptions and a
# static guard (forbidden_symbols_probe.cc), it must exit non-zero and name each kind.
#   tests/embedded/check_symbols_selftest.sh build/cortex-m4/tests/embedded/libprobe.a
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 PROBE.a" >&2
  exit 2
fi
here=$(dirname "$0")
output=$("$here/check_symbols.sh" "$1" 2>&1)
status=$?
echo "$output"
if [[ $status -eq 0 ]]; then
  echo "check_symbols_selftest: FAIL: the check passed a library that breaks every rule" >&2
  exit 1
fi
missing=0
for symbol in malloc free '_Znaj' '_ZdaPv' __cxa_throw __cxa_guard_acquire; do
  if ! grep -qE ": ${symbol}[^ ]* \(" <<<"$output"; then
    echo "check_symbols_selftest: FAIL: the check did not report $symbol" >&2
    missing=1
  fi
done
if [[ $missing -ne 0 ]]; then exit 1; fi
echo "check_symbols_selftest: OK: every forbidden kind was reported"
