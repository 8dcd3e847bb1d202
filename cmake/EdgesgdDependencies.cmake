# Third-party dependencies, all from Debian packages. Cross builds must not use Debian's
# x86-64-only CMake package configs, so header-only dependencies become INTERFACE targets over the
# header folders, which are architecture-independent.

find_path(EDGESGD_EIGEN_INCLUDE_DIR NAMES Eigen/Core PATHS /usr/include/eigen3 PATH_SUFFIXES eigen3
          NO_CMAKE_FIND_ROOT_PATH REQUIRED)
# Installed without the path: the package's config file finds Eigen where it is used.
add_library(edgesgd_eigen INTERFACE)
target_include_directories(edgesgd_eigen SYSTEM INTERFACE
  $<BUILD_INTERFACE:${EDGESGD_EIGEN_INCLUDE_DIR}>)
