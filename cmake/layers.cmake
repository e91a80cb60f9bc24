# Ember's layers as build targets. ember_layer(name USES ... SOURCES ...) makes the object
# library ember_layer_<name> from the sources of src/<name>/ and records which layers it uses;
# ember_layer_check() then adds the target that fails the build when a file in src/<layer>/
# includes a header of a layer that is neither that layer nor one it uses (directly or through
# the layers it uses). cmake/check_layers.cmake does the checking; docs/architecture.md explains
# the layers.
#
# Options of ember_layer:
#   CHECK_ONLY          the folder is checked but built elsewhere (the ember program, ember_onnx)
#   FRONT_END_HEADERS   the layer may include every public header; the layers without it may
#                       include only the foundation ones (EMBER_FOUNDATION_HEADERS below), so that
#                       no layer under the op front end calls the op API
#   ALSO_INCLUDES h...  named headers of a layer above that this one may include, each a
#                       deliberate exception documented where the include is

# Public headers every layer may include: the core types, errors, and the diagnostics switches
# (statistics, anomaly mode, profiler) that the lower layers implement.
set(EMBER_FOUNDATION_HEADERS
    ember/dtype.h ember/shape.h ember/device.h ember/error.h ember/version.h ember/plugin_dir.h
    ember/elementwise_ops.def ember/op_options.h ember/debug.h ember/anomaly.h ember/profiler.h)
# Headers outside the layer folders that every layer may include: the plugin ABI (the contract
# between the runtime and the plugins in src/backend/, which never include the core).
set(EMBER_SHARED_HEADERS backend/abi.h backend/library_attrs.h)

set_property(GLOBAL PROPERTY EMBER_LAYERS "")
set(EMBER_LAYER_OBJECTS "")

function(ember_layer name)
  cmake_parse_arguments(L "CHECK_ONLY;FRONT_END_HEADERS" "" "USES;SOURCES;ALSO_INCLUDES" ${ARGN})
  foreach(used ${L_USES})
    get_property(known GLOBAL PROPERTY EMBER_LAYER_${used}_CLOSURE SET)
    if(NOT known)
      message(FATAL_ERROR "ember_layer(${name}): uses '${used}', which is not a layer declared before it "
                          "(layers are declared bottom to top)")
    endif()
  endforeach()
  # The layers this one may include: itself and the closure of the layers it uses.
  set(closure ${name})
  foreach(used ${L_USES})
    get_property(c GLOBAL PROPERTY EMBER_LAYER_${used}_CLOSURE)
    list(APPEND closure ${c})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY EMBER_LAYER_${name}_CLOSURE ${closure})
  # One row of the table the check reads (fields separated by '|', lists by spaces).
  string(REPLACE ";" " " closure_text "${closure}")
  string(REPLACE ";" " " extra_text "${L_ALSO_INCLUDES}")
  set_property(GLOBAL APPEND PROPERTY EMBER_LAYERS
               "${name}|${closure_text}|${L_FRONT_END_HEADERS}|${extra_text}")
  if(L_CHECK_ONLY)
    return()
  endif()
  add_library(ember_layer_${name} OBJECT ${L_SOURCES})
  target_include_directories(ember_layer_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(ember_layer_${name} PRIVATE
    EMBER_INSTALLED_PLUGIN_DIR="${CMAKE_INSTALL_PREFIX}/${EMBER_PLUGIN_INSTALL_DIR}")
  target_link_libraries(ember_layer_${name} PRIVATE fmt::fmt)
  foreach(used ${L_USES})
    # Usage requirements only: object libraries do not pass their objects on.
    target_link_libraries(ember_layer_${name} PUBLIC ember_layer_${used})
  endforeach()
  set(EMBER_LAYER_OBJECTS ${EMBER_LAYER_OBJECTS} $<TARGET_OBJECTS:ember_layer_${name}> PARENT_SCOPE)
  set_property(GLOBAL APPEND PROPERTY EMBER_LAYER_OBJECT_ROWS "${name}|$<TARGET_OBJECTS:ember_layer_${name}>")
endfunction()

# The check, run at build time whenever a file of a layer folder or the table changes.
function(ember_layer_check)
  get_property(layers GLOBAL PROPERTY EMBER_LAYERS)
  set(table "${CMAKE_BINARY_DIR}/ember_layers.txt")
  string(REPLACE ";" "\n" rows "${layers}")
  file(CONFIGURE OUTPUT ${table} CONTENT "${rows}\n")
  set(files "")
  foreach(row ${layers})
    string(REGEX REPLACE "\\|.*" "" name "${row}")
    file(GLOB_RECURSE layer_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*)
    list(APPEND files ${layer_files})
  endforeach()
  # Each built layer's object files, one "layer|a.o;b.o" row per layer, for the symbol test
  # (tests/cmake/layer_symbols_test.cmake).
  get_property(object_rows GLOBAL PROPERTY EMBER_LAYER_OBJECT_ROWS)
  string(REPLACE ">;" ">\n" object_text "${object_rows}")
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/ember_layer_objects.txt" CONTENT "${object_text}\n")
  set(stamp "${CMAKE_BINARY_DIR}/ember_layer_check.stamp")
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR}/src -DTABLE=${table}
            "-DFOUNDATION=${EMBER_FOUNDATION_HEADERS}" "-DSHARED=${EMBER_SHARED_HEADERS}"
            -DSTAMP=${stamp} -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    DEPENDS ${files} ${table} ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
            ${CMAKE_SOURCE_DIR}/cmake/layer_table.cmake
    COMMENT "Checking that every include points down the layers (cmake/layers.cmake)"
    VERBATIM)
  add_custom_target(ember_layer_check DEPENDS ${stamp})
endfunction()
