# LayerCheck.RejectsAnIncludeUpTheLayers: runs cmake/check_layers.cmake on a small tree of three
# layers (core < graph < scheduler) twice: with only downward includes it passes; with a graph
# file that includes a scheduler header and the op API it fails, naming both includes.
# cmake -DCHECK=<check_layers.cmake> -DWORK=<scratch folder> -P layer_check_test.cmake

file(REMOVE_RECURSE "${WORK}")
file(WRITE "${WORK}/src/core/shape.h" "#pragma once\n#include \"ember/error.h\"\n")
file(WRITE "${WORK}/src/graph/node.cpp" "#include \"core/shape.h\"\n#include \"backend/abi.h\"\n#include <vector>\n")
file(WRITE "${WORK}/src/scheduler/plan.h" "#pragma once\n#include \"graph/node.h\"\n#include \"ember/ops.h\"\n")
file(WRITE "${WORK}/table.txt" "core|core||\ngraph|graph core||\nscheduler|scheduler graph core|TRUE|\n")

function(run_check result output)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DSRC=${WORK}/src -DTABLE=${WORK}/table.txt "-DFOUNDATION=ember/error.h"
            "-DSHARED=backend/abi.h" -DSTAMP=${WORK}/stamp -P ${CHECK}
    RESULT_VARIABLE r OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${result} ${r} PARENT_SCOPE)
  set(${output} "${o}${e}" PARENT_SCOPE)
endfunction()

run_check(r out)
if(NOT r EQUAL 0 OR NOT EXISTS "${WORK}/stamp")
  message(FATAL_ERROR "a tree whose includes all point down was refused:\n${out}")
endif()

file(REMOVE "${WORK}/stamp")
file(APPEND "${WORK}/src/graph/node.cpp" "#include \"scheduler/plan.h\"\n#include \"ember/ops.h\"\n")
run_check(r out)
if(r EQUAL 0 OR EXISTS "${WORK}/stamp")
  message(FATAL_ERROR "an include up the layers passed the check:\n${out}")
endif()
foreach(expected
    "2 include(s) point up the layers"
    "src/graph/node.cpp: #include \"scheduler/plan.h\": layer 'graph' may include only graph core"
    "src/graph/node.cpp: #include \"ember/ops.h\": layer 'graph' is below the op front end")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check's message lacks '${expected}':\n${out}")
  endif()
endforeach()
message(STATUS "the layer check passes downward includes and names the two upward ones")
