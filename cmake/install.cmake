# Installation: headers, libember (shared and static), backend plugins in lib/ember/plugins,
# a CMake package (find_package(Ember) -> Ember::ember, Ember::ember_static) and ember.pc.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/ember DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_BINARY_DIR}/include/ember/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember)
install(TARGETS ember ember_static EXPORT EmberTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(plugin ember_backend_cpu ember_backend_reference)
  if(TARGET ${plugin})
    install(TARGETS ${plugin} LIBRARY DESTINATION ${EMBER_PLUGIN_INSTALL_DIR})
  endif()
endforeach()
if(TARGET ember-cli)
  install(TARGETS ember-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(EMBER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)
install(EXPORT EmberTargets NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_DIR})
configure_package_config_file(cmake/EmberConfig.cmake.in ${CMAKE_BINARY_DIR}/EmberConfig.cmake
                              INSTALL_DESTINATION ${EMBER_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/EmberConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/EmberConfig.cmake ${CMAKE_BINARY_DIR}/EmberConfigVersion.cmake
        DESTINATION ${EMBER_CMAKE_DIR})

configure_file(cmake/ember.pc.in ${CMAKE_BINARY_DIR}/ember.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ember.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
