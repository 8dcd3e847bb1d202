# Cross build for 64-bit ARM Linux boards (Raspberry Pi 4/5, Jetson, i.MX8) with Debian's
# g++-aarch64-linux-gnu. Tests run under qemu-user; binfmt is not registered on the CI host, so
# ctest calls qemu explicitly and -L points it at the target's dynamic loader and libraries.
#   cmake --workflow --preset aarch64
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(EDGESGD_TARGET_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${EDGESGD_TARGET_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGESGD_TARGET_TRIPLE}-g++)

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/${EDGESGD_TARGET_TRIPLE})

# Libraries only for the target (never link x86-64 ones), programs only from the host. Two roots:
# the cross sysroot, and / for Debian multiarch packages of the target architecture
# (libmbedtls-dev and zlib1g-dev for arm64/armhf from cmake/install-debian-deps.sh cross), which
# live in /usr/lib/<triple>. Under / CMake looks in lib/<triple> for this target's triple, never
# in x86_64-linux-gnu. Headers and packages BOTH: Eigen, Asio, mbed TLS and zlib are
# architecture-independent headers under /usr/include, which ONLY would hide.
set(CMAKE_LIBRARY_ARCHITECTURE ${EDGESGD_TARGET_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${EDGESGD_TARGET_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
