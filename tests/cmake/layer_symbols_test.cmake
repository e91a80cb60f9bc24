# LayerCheck.SymbolsPointDownTheLayers: the include check (cmake/check_layers.cmake) cannot see a
# function declared in a public header and defined in a higher layer. This test reads the built
# objects of every layer with nm: each symbol a layer uses must be defined in that layer or in
# one it may use, except the edges named in ALLOWED ("autograd>ops": backward rules call the op
# front ends, docs/architecture.md). Weak symbols (inline functions, templates) belong to no layer.
# cmake -DOBJECTS=<file: "layer|obj;obj;..." rows> -DTABLE=<ember_layers.txt> -DALLOWED=<edges>
#       -DNM=<nm> -P layer_symbols_test.cmake

cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/layer_table.cmake)
ember_read_layer_table("${TABLE}")
set(layers ${EMBER_LAYER_NAMES})

# Which layer defines each strong symbol.
file(STRINGS "${OBJECTS}" object_rows)
set(built "")
foreach(row ${object_rows})
  string(REGEX REPLACE "\\|.*" "" name "${row}")
  string(REGEX REPLACE "^[^|]*\\|" "" objects "${row}")
  if(NOT name IN_LIST layers)
    message(FATAL_ERROR "objects of '${name}', which the layer table does not list")
  endif()
  list(APPEND built ${name})
  set(objects_${name} ${objects})
  execute_process(COMMAND ${NM} -g --defined-only ${objects} OUTPUT_VARIABLE out RESULT_VARIABLE r)
  if(NOT r EQUAL 0)
    message(FATAL_ERROR "${NM} failed on the objects of layer ${name}")
  endif()
  string(REGEX MATCHALL "[0-9a-f]+ [TDBR] [^\n]+" defined "${out}")
  foreach(d ${defined})
    string(REGEX REPLACE "^[0-9a-f]+ [TDBR] " "" sym "${d}")
    set("owner_${sym}" ${name})
  endforeach()
endforeach()
list(LENGTH built count)
if(count LESS 8)
  message(FATAL_ERROR "only ${count} layers have objects (${built}): the object list is wrong")
endif()

set(violations "")
set(checked 0)
foreach(name ${built})
  execute_process(COMMAND ${NM} -u -A ${objects_${name}} OUTPUT_VARIABLE out)
  string(REGEX MATCHALL "[^\n]+ U [^\n]+" used "${out}")
  foreach(u ${used})
    string(REGEX REPLACE ".* U " "" sym "${u}")
    set(owner "${owner_${sym}}")
    if(owner STREQUAL "")
      continue()  # the C++ library, fmt, a weak symbol
    endif()
    math(EXPR checked "${checked} + 1")
    if(owner IN_LIST closure_${name} OR "${name}>${owner}" IN_LIST ALLOWED)
      continue()
    endif()
    string(REGEX REPLACE ":.*" "" object "${u}")
    string(REGEX REPLACE ".*/src/" "src/" object "${object}")
    list(APPEND violations "${object} (layer ${name}) uses ${sym}, defined in layer ${owner}")
  endforeach()
endforeach()

if(violations)
  list(LENGTH violations n)
  string(REPLACE ";" "\n  " text "${violations}")
  message(FATAL_ERROR "${n} symbol use(s) point up the layers (demangle with c++filt):\n  ${text}")
endif()
if(checked LESS 1000)
  message(FATAL_ERROR "only ${checked} uses of the library's own symbols were found: nm's output was not read")
endif()
message(STATUS "${checked} uses of symbols across ${count} layers all point down the layers")
