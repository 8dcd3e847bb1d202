# Bare-metal Cortex-M4F (hard-float, single-precision FPU) with Debian's gcc-arm-none-eabi and
# newlib. Builds edgesgd::core, the cortex_m platform backend and the smoke image, which runs on
# `qemu-system-arm -M mps2-an386` (tests/embedded/run_mcu.sh).
#   cmake --workflow --preset cortex-m4
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
# An executable cannot link without a startup file and linker script, which the project provides
# (platform/cortex_m); CMake's compiler checks therefore build a static library instead.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# Selects the platform backend and leaves out everything that needs an OS (tests, Asio).
set(EDGESGD_BARE_METAL ON CACHE BOOL "Build for a bare-metal target" FORCE)

# The hard-float ABI with the M4's FPv4-SP unit; picks newlib's thumb/v7e-m+fp/hard multilib.
# nano.specs is a compile flag too: it puts newlib-nano's <newlib.h> configuration first on the
# include path, which must match the libc_nano the image links. Sections per function and object
# let --gc-sections drop whatever the image does not reach.
string(JOIN " " EDGESGD_MCU_FLAGS -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16
       --specs=nano.specs -ffunction-sections -fdata-sections)
set(CMAKE_C_FLAGS_INIT "${EDGESGD_MCU_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${EDGESGD_MCU_FLAGS}")
set(CMAKE_ASM_FLAGS_INIT "${EDGESGD_MCU_FLAGS}")
# Flash is the scarce resource, so the cortex-m4 preset builds MinSizeRel, for which CMake's GNU
# defaults are already -Os -DNDEBUG (setting them here would only repeat them).

# rdimon: newlib's system calls over semihosting, so stdio and exit(n) in application code reach
# the host (qemu's stdout and exit status). -nostartfiles: the platform backend's startup code
# replaces crt0/crti/crtbegin (it owns the vector table, FPU enable, .data/.bss and init arrays);
# the backend adds it and the linker script to every image linking edgesgd::platform.
set(CMAKE_EXE_LINKER_FLAGS_INIT "--specs=rdimon.specs -Wl,--gc-sections")

# Libraries and headers only from the newlib sysroot: arm-none-eabi must never see the host's
# /usr/include. Eigen is found outside it on purpose (cmake/EdgesgdDependencies.cmake uses
# NO_CMAKE_FIND_ROOT_PATH for /usr/include/eigen3 alone).
set(CMAKE_FIND_ROOT_PATH /usr/lib/arm-none-eabi)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
