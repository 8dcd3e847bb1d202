# FlatBuffers for edgesgd::wire, on every target (host, ARM Linux, bare-metal Cortex-M).
#
# - The runtime is header-only and architecture-independent, but Debian's FlatBuffers CMake
#   config is x86-64-only and arm-none-eabi must not see the host's /usr/include: the headers are
#   exposed through a folder in the build tree holding links to Debian's files (and nothing else
#   of /usr/include), as the INTERFACE target edgesgd_flatbuffers.
# - In that folder flatbuffers/default_allocator.h is replaced by a heap-free version (see the
#   file named by EDGESGD_FLATBUFFERS_OVERLAY), so no edgesgd library references operator new.
# - Code is generated at build time by the host flatc (never a cross one), which must be the
#   exact version of the headers: generated code static_asserts it.
#
# Provides: target edgesgd_flatbuffers (and the install rule of its overlay), variable
# EDGESGD_FLATC_EXECUTABLE, function edgesgd_flatbuffers_generate().

include_guard(GLOBAL)

if(NOT DEFINED EDGESGD_FLATBUFFERS_OVERLAY)
  set(EDGESGD_FLATBUFFERS_OVERLAY
      ${CMAKE_CURRENT_LIST_DIR}/../transport/wire/third_party/flatbuffers/default_allocator.h)
endif()

# Host paths on purpose: toolchain files restrict searches to the target sysroot.
find_path(EDGESGD_FLATBUFFERS_INCLUDE_DIR NAMES flatbuffers/flatbuffers.h
          PATHS /usr/include NO_CMAKE_FIND_ROOT_PATH REQUIRED
          DOC "Folder holding the FlatBuffers headers (flatbuffers/*.h)")
find_program(EDGESGD_FLATC_EXECUTABLE NAMES flatc NO_CMAKE_FIND_ROOT_PATH REQUIRED
             DOC "Host flatc, the same version as the FlatBuffers headers")

# flatc and headers must agree exactly.
file(STRINGS ${EDGESGD_FLATBUFFERS_INCLUDE_DIR}/flatbuffers/base.h _edgesgd_fb_version_lines
     REGEX "^#define FLATBUFFERS_VERSION_(MAJOR|MINOR|REVISION) ")
set(_edgesgd_fb_header_version "")
foreach(_part MAJOR MINOR REVISION)
  string(REGEX MATCH "FLATBUFFERS_VERSION_${_part} ([0-9]+)" _match "${_edgesgd_fb_version_lines}")
  list(APPEND _edgesgd_fb_header_version ${CMAKE_MATCH_1})
endforeach()
list(JOIN _edgesgd_fb_header_version "." _edgesgd_fb_header_version)
execute_process(COMMAND ${EDGESGD_FLATC_EXECUTABLE} --version
                OUTPUT_VARIABLE _edgesgd_flatc_output RESULT_VARIABLE _edgesgd_flatc_result)
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" _edgesgd_flatc_version "${_edgesgd_flatc_output}")
if(NOT _edgesgd_flatc_result EQUAL 0 OR
   NOT _edgesgd_flatc_version VERSION_EQUAL _edgesgd_fb_header_version)
  message(FATAL_ERROR "flatc ${EDGESGD_FLATC_EXECUTABLE} is version '${_edgesgd_flatc_version}' "
                      "but the headers in ${EDGESGD_FLATBUFFERS_INCLUDE_DIR} are "
                      "${_edgesgd_fb_header_version}; generated code requires an exact match")
endif()
set(EDGESGD_FLATBUFFERS_VERSION ${_edgesgd_fb_header_version})
# The installed package insists on the same headers (generated code static_asserts the version).
set_property(GLOBAL PROPERTY EDGESGD_FLATBUFFERS_VERSION ${EDGESGD_FLATBUFFERS_VERSION})

# The include folder: links to every upstream header except the replaced allocator. Existing
# links are left alone so reconfiguring does not touch timestamps (and rebuild everything).
set(_edgesgd_fb_root ${CMAKE_BINARY_DIR}/edgesgd_flatbuffers/include)
set(_edgesgd_fb_dir ${_edgesgd_fb_root}/flatbuffers)
file(MAKE_DIRECTORY ${_edgesgd_fb_dir})
file(GLOB _edgesgd_fb_entries LIST_DIRECTORIES true
     RELATIVE ${EDGESGD_FLATBUFFERS_INCLUDE_DIR}/flatbuffers
     ${EDGESGD_FLATBUFFERS_INCLUDE_DIR}/flatbuffers/*)
foreach(_entry IN LISTS _edgesgd_fb_entries)
  if(_entry STREQUAL "default_allocator.h")
    continue()
  endif()
  if(NOT IS_SYMLINK ${_edgesgd_fb_dir}/${_entry})
    file(CREATE_LINK ${EDGESGD_FLATBUFFERS_INCLUDE_DIR}/flatbuffers/${_entry}
         ${_edgesgd_fb_dir}/${_entry} SYMBOLIC)
  endif()
endforeach()
if(IS_SYMLINK ${_edgesgd_fb_dir}/default_allocator.h)
  file(REMOVE ${_edgesgd_fb_dir}/default_allocator.h)
endif()
# COPYONLY rewrites only on change and reconfigures when the overlay is edited.
configure_file(${EDGESGD_FLATBUFFERS_OVERLAY} ${_edgesgd_fb_dir}/default_allocator.h COPYONLY)

add_library(edgesgd_flatbuffers INTERFACE)
# Installed: the overlay alone, in front of the FlatBuffers headers the package's config file
# finds (the upstream headers include "flatbuffers/default_allocator.h", which resolves to the
# overlay first).
set(EDGESGD_FLATBUFFERS_OVERLAY_INSTALL_DIR ${CMAKE_INSTALL_INCLUDEDIR}/edgesgd/third_party)
target_include_directories(edgesgd_flatbuffers SYSTEM INTERFACE
                           $<BUILD_INTERFACE:${_edgesgd_fb_root}>
                           $<INSTALL_INTERFACE:${EDGESGD_FLATBUFFERS_OVERLAY_INSTALL_DIR}>)
install(FILES ${EDGESGD_FLATBUFFERS_OVERLAY}
        DESTINATION ${EDGESGD_FLATBUFFERS_OVERLAY_INSTALL_DIR}/flatbuffers)
# Every translation unit that sees these headers must see the same configuration (the overlay
# relies on it), so it lives on this target:
# - FLATBUFFERS_ASSERT becomes EDGESGD_CHECK: builder misuse and a missing allocator reach the
#   platform fatal handler on every target, instead of assert(), which NDEBUG removes and which
#   pulls __assert_func into bare-metal images;
# - heap-using builder helpers (CreateSharedString, vectors from generators) assert.
target_compile_definitions(edgesgd_flatbuffers INTERFACE
  FLATBUFFERS_ASSERT=EDGESGD_CHECK
  "FLATBUFFERS_ASSERT_INCLUDE=\"edgesgd/core/check.h\""
  FLATBUFFERS_GENERAL_HEAP_ALLOC_OK=0)
target_link_libraries(edgesgd_flatbuffers INTERFACE edgesgd_core)  # check.h, PlatformFatal

# edgesgd_flatbuffers_generate(TARGET <target> SCHEMA <file.fbs> OUTPUT_DIR <dir>)
# Generates <dir>/<name>_generated.h from the schema with the host flatc before <target>
# compiles. The caller adds the include folder that makes the header reachable.
function(edgesgd_flatbuffers_generate)
  cmake_parse_arguments(ARG "" "TARGET;SCHEMA;OUTPUT_DIR" "" ${ARGN})
  get_filename_component(_name ${ARG_SCHEMA} NAME_WE)
  set(_header ${ARG_OUTPUT_DIR}/${_name}_generated.h)
  # --scoped-enums: enum classes, so schema enums never convert silently.
  add_custom_command(
    OUTPUT ${_header}
    COMMAND ${EDGESGD_FLATC_EXECUTABLE} --cpp --scoped-enums -o ${ARG_OUTPUT_DIR} ${ARG_SCHEMA}
    DEPENDS ${ARG_SCHEMA} ${EDGESGD_FLATC_EXECUTABLE}
    COMMENT "flatc ${EDGESGD_FLATBUFFERS_VERSION}: generating ${_name}_generated.h"
    VERBATIM)
  add_custom_target(${ARG_TARGET}_flatc DEPENDS ${_header})
  add_dependencies(${ARG_TARGET} ${ARG_TARGET}_flatc)
  target_sources(${ARG_TARGET} PRIVATE ${_header})
endfunction()
