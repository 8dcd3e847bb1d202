# The part the ARM Linux toolchain files share; they set CMAKE_SYSTEM_PROCESSOR,
# EDGESGD_TARGET_TRIPLE (Debian's cross compiler prefix) and EDGESGD_TARGET_QEMU first.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${EDGESGD_TARGET_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGESGD_TARGET_TRIPLE}-g++)

# The target's libraries (mbed TLS, zlib) come from a sysroot of the project's own, unpacked from
# Debian's packages for the target by cmake/install-debian-deps.sh (docs/testing.md), never from
# the host's package database. EDGESGD_TARGET_SYSROOT (environment) points elsewhere, e.g. at a
# board's root file system.
if(DEFINED ENV{EDGESGD_TARGET_SYSROOT})
  set(EDGESGD_TARGET_SYSROOT $ENV{EDGESGD_TARGET_SYSROOT})
else()
  get_filename_component(EDGESGD_TARGET_SYSROOT
                         ${CMAKE_CURRENT_LIST_DIR}/../build/sysroots/${EDGESGD_TARGET_TRIPLE}
                         ABSOLUTE)
endif()

# Tests run under qemu-user (binfmt is not registered on the CI host, so ctest calls qemu
# explicitly); -L points it at the cross toolchain's dynamic loader and C/C++ runtimes. The
# sysroot's libraries need no runtime path: they are linked statically (see below).
set(CMAKE_CROSSCOMPILING_EMULATOR ${EDGESGD_TARGET_QEMU};-L;/usr/${EDGESGD_TARGET_TRIPLE})

# Libraries only from the target's roots (never x86-64 ones), programs only from the host. Under
# the sysroot CMake looks in usr/lib/<triple> for this target's triple. Headers and packages
# BOTH: Eigen, Asio, CLI11 and FlatBuffers are architecture-independent headers under the host's
# /usr/include, which ONLY would hide; the sysroot's own headers (mbed TLS, zlib) come first.
set(CMAKE_LIBRARY_ARCHITECTURE ${EDGESGD_TARGET_TRIPLE})
set(CMAKE_FIND_ROOT_PATH ${EDGESGD_TARGET_SYSROOT} /usr/${EDGESGD_TARGET_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# zlib is linked from its static archive, as mbed TLS's libmbedcrypto is (transport/auth): a
# program then needs only the C and C++ runtimes, which qemu finds in the toolchain's folder and a
# board has anyway, and not the sysroot's shared libraries at run time.
set(ZLIB_USE_STATIC_LIBS ON)
