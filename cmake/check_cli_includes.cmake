# cmake -DTOOLS_DIR=<tools/> -DLAYERS=<a,b,...> -DGATE=cli_internal.h [-DSTAMP=<file>] -P check_cli_includes.cmake
#
# The CLI (tools/) sees the public API (boostcomm/...), its own headers, and
# the library's internals through ONE of them, ${GATE} (which says what it
# takes from which layer and why). Its include path has to reach every layer
# (the gate includes them), so the compiler cannot tell a direct include of,
# say, overlap/overlap_impl.h from the sanctioned one; this check can, and
# runs before boostcomm_cli compiles. Relative climbs ("../src/...") are
# refused too.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" LAYERS "${LAYERS}")
# Every layer must arrive: with only some, includes of the others would pass unseen.
foreach(layer core api simulate overlap)
  if(NOT layer IN_LIST LAYERS)
    message(FATAL_ERROR "check_cli_includes: LAYERS lacks '${layer}' (got '${LAYERS}')")
  endif()
endforeach()
file(GLOB sources ${TOOLS_DIR}/*.cc ${TOOLS_DIR}/*.h)
list(REMOVE_ITEM sources ${TOOLS_DIR}/${GATE})
set(errors "")
foreach(source IN LISTS sources)
  file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" header "${line}")
    string(REGEX MATCH "^[^/]+" first "${header}")
    if(header MATCHES "\\.\\./")
      list(APPEND errors "${source}: ${header} (relative climb out of tools/)")
    elseif(first IN_LIST LAYERS)
      list(APPEND errors "${source}: ${header} (tools/ reaches the library's internals only through ${GATE})")
    endif()
  endforeach()
endforeach()
if(errors)
  list(JOIN errors "\n  " text)
  message(FATAL_ERROR "Layering: internal headers included from tools/:\n  ${text}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
