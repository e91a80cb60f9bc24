# Checks that every include in a layer folder points down the layers (cmake/layers.cmake), as a
# script: cmake -DSRC=<src> -DTABLE=<table> -DFOUNDATION=<headers> -DSHARED=<headers>
# -DSTAMP=<file> -P check_layers.cmake. A table row is "layer|may-include layers|front-end
# headers allowed|extra headers" (layer_table.cmake). Prints every violation (file, include, why)
# and fails; touches STAMP when there is none.

cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/layer_table.cmake)
ember_read_layer_table("${TABLE}")
set(layer_names ${EMBER_LAYER_NAMES})

string(REPLACE ";" " " foundation_text "${FOUNDATION}")
string(REPLACE ";" " " shared_text "${SHARED}")
set(violations "")
foreach(name ${layer_names})
  file(GLOB_RECURSE files RELATIVE "${SRC}" "${SRC}/${name}/*")
  foreach(rel ${files})
    file(STRINGS "${SRC}/${rel}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
    foreach(inc ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${inc}")
      if(header MATCHES "^ember/")
        if(front_end_${name} OR header IN_LIST FOUNDATION)
          continue()
        endif()
        list(APPEND violations
             "src/${rel}: #include \"${header}\": layer '${name}' is below the op front end and may include only the foundation public headers (${foundation_text})")
        continue()
      endif()
      if(NOT header MATCHES "/")
        continue()  # a file next to the includer (a .def or .inc of the same folder)
      endif()
      if(header IN_LIST SHARED OR header IN_LIST extra_${name})
        continue()
      endif()
      string(REGEX REPLACE "/.*" "" folder "${header}")
      if(NOT folder IN_LIST layer_names)
        if(EXISTS "${SRC}/${header}")
          list(APPEND violations
               "src/${rel}: #include \"${header}\": src/${folder}/ is not a layer (only the plugin ABI headers ${shared_text} are shared)")
        endif()
        continue()  # a system or third-party header (e.g. hwy/...)
      endif()
      if(NOT folder IN_LIST closure_${name})
        string(REPLACE ";" " " closure_text "${closure_${name}}")
        list(APPEND violations
             "src/${rel}: #include \"${header}\": layer '${name}' may include only ${closure_text} ('${folder}' is not below it)")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(LENGTH violations count)
  string(REPLACE ";" "\n  " text "${violations}")
  message(FATAL_ERROR "${count} include(s) point up the layers (cmake/layers.cmake):\n  ${text}")
endif()
file(TOUCH "${STAMP}")
