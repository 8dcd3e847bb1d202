# Cross build for 32-bit ARM Linux boards (ARMv7-A hard-float: Raspberry Pi 2/3 on a 32-bit OS,
# BeagleBone, i.MX6) with Debian's g++-arm-linux-gnueabihf; tests run under qemu-arm.
#   cmake --workflow --preset armhf
set(CMAKE_SYSTEM_PROCESSOR arm)
set(EDGESGD_TARGET_TRIPLE arm-linux-gnueabihf)
set(EDGESGD_TARGET_QEMU qemu-arm)
include(${CMAKE_CURRENT_LIST_DIR}/linux-cross.cmake)
