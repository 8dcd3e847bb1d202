# install(EXPORT) so a downstream project can find_package(edgesgd) and link edgesgd::core.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS edgesgd_core edgesgd_platform edgesgd_eigen EXPORT edgesgdTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(edgesgd_eigen PROPERTIES EXPORT_NAME eigen)
install(DIRECTORY core/include/ platform/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT edgesgdTargets NAMESPACE edgesgd:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)
configure_package_config_file(cmake/edgesgdConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/edgesgdConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edgesgd)
