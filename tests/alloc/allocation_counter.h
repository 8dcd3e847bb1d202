#pragma once

#include <cstddef>

namespace edgesgd::testing {

// Number of heap allocations (operator new in every form, and malloc/calloc/realloc where the
// C allocator can be interposed) made by this process so far. Linked into the allocation-test
// binary only, which replaces the global allocation functions.
std::size_t HeapAllocationCount();

// Whether malloc-family calls are counted too (not under AddressSanitizer, which owns malloc).
bool CountsMallocCalls();

}  // namespace edgesgd::testing
