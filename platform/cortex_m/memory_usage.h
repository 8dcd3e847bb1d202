#pragma once

// Memory use of a running Cortex-M image: flash (code, constants and .data's initial values), RAM
// taken statically (.data + .bss, fixed at link time) and the deepest the main stack has reached. Startup paints the unused stack with a pattern before
// main; StackPeakBytes finds the lowest word the pattern no longer holds. Images print both so a
// memory report can state measured RAM instead of the linker's reservation.
//
// Internal to the cortex_m backend and the images that report their memory; not installed.

#include <cstddef>

namespace edgesgd::platform::internal {

// Fills the stack between its limit and (just below) the caller's frame with the paint pattern.
// Called once by startup, before static constructors and main.
void PaintUnusedStack();

// Bytes of the main stack used so far (its top down to the lowest overwritten word). Accurate
// to one word, unless something wrote the pattern itself.
std::size_t StackPeakBytes();

// .data + .bss: RAM taken before main runs.
std::size_t StaticRamBytes();

// Bytes of flash the image occupies (from the vector table to the end of .data's load image).
std::size_t FlashBytes();

// Logs the three figures as one line, "memory: flash F B, static RAM S B, stack peak P B, RAM
// S+P B", the form tests/embedded/memory_report.py reads from an image's output.
void LogMemoryUse();

}  // namespace edgesgd::platform::internal
