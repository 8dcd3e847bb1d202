// Deliberately breaks every rule check_symbols.sh enforces (heap, exceptions, thread-safe static
// guards), compiled with the toolchain's defaults instead of edgesgd's embedded flags. The
// self-test proves the check finds each kind of offender; nothing links this into an image.

#include <cstdlib>
#include <new>

namespace edgesgd_probe {

struct Counter {
  Counter() : value(std::rand()) {}
  int value;
};

int UsesEverythingForbidden(int n) {
  static Counter counter;  // a guarded function-local static
  int* numbers = new int[static_cast<unsigned>(n)];
  void* raw = std::malloc(16);
  if (raw == nullptr) throw std::bad_alloc();
  std::free(raw);
  const int result = numbers[0] + counter.value;
  delete[] numbers;
  return result;
}

}  // namespace edgesgd_probe
