#!/usr/bin/env bash
# Proves the embedded promise on the libraries themselves: no object in them references the heap,
# C++ exceptions or thread-safe static guards. Any such undefined symbol is listed (with the
# object that needs it) and the script fails. Given a linked image (.elf) instead, it checks
# what the image contains: none of those functions, nor newlib's _sbrk behind malloc, may have
# been linked in, whoever asked for them.
#
#   tests/embedded/check_symbols.sh build/cortex-m4/core/libedgesgd_core.a \
#                                   build/cortex-m4/platform/libedgesgd_platform.a
#   tests/embedded/check_symbols.sh build/cortex-m4/examples/mcu/edgesgd_mcu_train_demo.elf
#
# NM selects the nm to use (default arm-none-eabi-nm; any GNU nm works for other targets).
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 LIB.a|IMAGE.elf..." >&2
  exit 2
fi
nm_tool=${NM:-arm-none-eabi-nm}

# Heap: malloc and friends, newlib's reentrant _r forms, operator new/new[]/delete/delete[] in
# every overload (j: 32-bit size_t, m: 64-bit). Exceptions: throw, catch and rethrow entry points.
# Guards: what function-local statics call without -fno-threadsafe-statics.
heap='malloc|free|calloc|realloc|reallocarray|aligned_alloc|memalign|posix_memalign'
heap+='|_malloc_r|_free_r|_calloc_r|_realloc_r|_Znw[jm].*|_Zna[jm].*|_ZdlPv.*|_ZdaPv.*'
exceptions='__cxa_throw|__cxa_rethrow|__cxa_allocate_exception|__cxa_begin_catch|__cxa_end_catch'
guards='__cxa_guard_acquire|__cxa_guard_release|__cxa_guard_abort'
forbidden="^(${heap}|${exceptions}|${guards})\$"
# In an image, operator delete may be present: the cortex_m backend defines it as a fatal stub
# (platform/cortex_m/no_heap.cc) for the deleting destructors vtables reference. What must be
# absent is any allocator, and the sbrk behind newlib's.
allocators='malloc|free|calloc|realloc|reallocarray|aligned_alloc|memalign|posix_memalign'
allocators+='|_malloc_r|_free_r|_calloc_r|_realloc_r|_sbrk|_sbrk_r|_Znw[jm].*|_Zna[jm].*'
forbidden_in_image="^(${allocators}|${exceptions}|${guards})\$"

status=0
for lib in "$@"; do
  if [[ ! -f "$lib" ]]; then
    echo "check_symbols: FAIL: $lib does not exist" >&2
    status=1
    continue
  fi
  if [[ "$lib" == *.elf ]]; then
    # An image: symbols it defines (what was linked in), each line "address type name".
    defined=$("$nm_tool" --defined-only "$lib")
    offenders=$(awk -v pattern="$forbidden_in_image" '$NF ~ pattern {print "image:", $2, $NF}' \
                <<<"$defined")
    if [[ -n "$offenders" ]]; then
      echo "check_symbols: FAIL: $lib links forbidden functions:" >&2
      while read -r _ _ symbol; do echo "  $symbol ($(c++filt "$symbol"))" >&2; done <<<"$offenders"
      status=1
    else
      echo "check_symbols: OK: $lib links no heap, exception or static-guard functions"
    fi
    continue
  fi
  # -A prefixes each line with archive:member, -u keeps undefined symbols only.
  undefined=$("$nm_tool" -A -u "$lib")
  offenders=$(awk -v pattern="$forbidden" '$NF ~ pattern {print}' <<<"$undefined")
  count=$(grep -c ' U ' <<<"$undefined" || true)
  if [[ -n "$offenders" ]]; then
    echo "check_symbols: FAIL: $lib references forbidden symbols:" >&2
    while read -r member _ symbol; do
      member=${member#"$lib":}
      echo "  ${member%:}: $symbol ($(c++filt "$symbol"))" >&2
    done <<<"$offenders"
    status=1
  else
    echo "check_symbols: OK: $lib ($count undefined references, none to heap, exceptions or" \
         "static guards)"
  fi
done
exit "$status"
