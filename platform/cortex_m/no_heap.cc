// Images on this backend have no heap. A class with a virtual destructor (the protocol sessions)
// has a deleting destructor in its vtable, emitted wherever an object is created, and that
// destructor references operator delete: without these definitions the linker would pull in
// libstdc++'s, and with it newlib's free and malloc, though nothing ever deletes a static or
// arena object. If one of them is ever called, something deleted an object that was never
// newed — a bug, reported like a failed CHECK.

#include <cstddef>
#include <new>

#include "edgesgd/core/check.h"

void operator delete(void*) noexcept {
  edgesgd::PlatformFatal(__FILE__, __LINE__, "operator delete on a heap-free image");
}

void operator delete(void*, std::size_t) noexcept {
  edgesgd::PlatformFatal(__FILE__, __LINE__, "operator delete on a heap-free image");
}
