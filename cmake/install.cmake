# Installation: headers, libember (shared and static), ember_onnx and ember_dist_mpi, backend plugins in lib/ember/plugins,
# a CMake package (find_package(Ember) -> Ember::ember, Ember::ember_static), ember.pc and
# ember-static.pc; bin/ember with a relative RUNPATH.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/ember DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(FILES ${CMAKE_BINARY_DIR}/include/ember/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember)
install(TARGETS ember ember_static EXPORT EmberTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The optional libraries, built where their Debian packages were found: ONNX import (ember_onnx)
# and the MPI collectives (ember_dist_mpi); bin/ember links them when they exist.
foreach(lib ember_onnx ember_dist_mpi)
  if(TARGET ${lib})
    install(TARGETS ${lib} EXPORT EmberTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
foreach(plugin ember_backend_cpu ember_backend_reference ember_backend_vulkan ember_backend_cuda)
  if(TARGET ${plugin})
    install(TARGETS ${plugin} LIBRARY DESTINATION ${EMBER_PLUGIN_INSTALL_DIR})
  endif()
endforeach()
if(TARGET ember-cli)
  # Relative RUNPATH: bin/ember finds lib/libember.so.0 wherever the prefix is (or moves).
  file(RELATIVE_PATH _ember_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(ember-cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_ember_bin_to_lib}")
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

# pkg-config: ember.pc (shared) and ember-static.pc; the prefix is written relative to the .pc
# file (${pcfiledir}), so it is right for any --prefix and for a moved tree.
file(RELATIVE_PATH EMBER_PC_PREFIX_FROM_PCDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
# No trailing slash: a "//" in ember-static.pc's unquoted -D path would start a C++ comment.
string(REGEX REPLACE "/+$" "" EMBER_PC_PREFIX_FROM_PCDIR "${EMBER_PC_PREFIX_FROM_PCDIR}")
# What libember.a needs at link time (and libember.so's private dependencies).
set(EMBER_PC_PRIVATE_LIBS "-lfmt")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND EMBER_PC_PRIVATE_LIBS " -l${lib}")
endforeach()
string(APPEND EMBER_PC_PRIVATE_LIBS " -lz -lstb -pthread")
configure_file(cmake/ember.pc.in ${CMAKE_BINARY_DIR}/ember.pc @ONLY)
configure_file(cmake/ember-static.pc.in ${CMAKE_BINARY_DIR}/ember-static.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ember.pc ${CMAKE_BINARY_DIR}/ember-static.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
