# install(EXPORT) so a downstream project can find_package(edgesgd COMPONENTS ...) and link
# edgesgd::core, platform, wire, serial, protocol, sim, auth, secagg and tcp (whichever this build has). Third-party
# code is not installed: its INTERFACE targets (edgesgd::eigen, flatbuffers, mbedcrypto, asio)
# are exported without paths, and edgesgdConfig.cmake finds the headers and libraries on the
# machine that uses the package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EDGESGD_PACKAGE_COMPONENTS)
set(_edgesgd_installed_targets)
foreach(component core platform wire serial protocol sim auth secagg tcp)
  if(TARGET edgesgd_${component})
    list(APPEND EDGESGD_PACKAGE_COMPONENTS ${component})
    list(APPEND _edgesgd_installed_targets edgesgd_${component})
  endif()
endforeach()
foreach(dependency eigen flatbuffers mbedcrypto asio)
  if(TARGET edgesgd_${dependency})
    set_target_properties(edgesgd_${dependency} PROPERTIES EXPORT_NAME ${dependency})
    list(APPEND _edgesgd_installed_targets edgesgd_${dependency})
  endif()
endforeach()
install(TARGETS ${_edgesgd_installed_targets} EXPORT edgesgdTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The public headers of every installed library (wire's generated header and FlatBuffers overlay
# are installed where they are made).
install(DIRECTORY core/include/ platform/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(layer wire serial protocol sim auth secagg tcp)
  if(TARGET edgesgd_${layer})
    install(DIRECTORY transport/${layer}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()
install(EXPORT edgesgdTargets NAMESPACE edgesgd:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)

# What the config file needs to know about this build.
get_property(_edgesgd_tls GLOBAL PROPERTY EDGESGD_TCP_TLS)
set(EDGESGD_PACKAGE_TLS 0)
if(_edgesgd_tls)
  set(EDGESGD_PACKAGE_TLS 1)
endif()
get_property(EDGESGD_PACKAGE_FLATBUFFERS_VERSION GLOBAL PROPERTY EDGESGD_FLATBUFFERS_VERSION)
configure_package_config_file(cmake/edgesgdConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)
