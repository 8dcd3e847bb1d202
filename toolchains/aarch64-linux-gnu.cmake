# Cross build for 64-bit ARM Linux boards (Raspberry Pi 4/5, Jetson, i.MX8) with Debian's
# g++-aarch64-linux-gnu; tests run under qemu-aarch64.
#   cmake --workflow --preset aarch64
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EDGESGD_TARGET_TRIPLE aarch64-linux-gnu)
set(EDGESGD_TARGET_QEMU qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/linux-cross.cmake)
