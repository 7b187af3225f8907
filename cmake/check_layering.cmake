# cmake -DCXX=<compiler> [-DCXX_FLAGS=<flags>] -DDIRS=src/api,src/ops
#       -DFORBIDDEN=node,hypervisor [-DSKIP=<regex>] -P cmake/check_layering.cmake
# (run from the source tree): no file in DIRS may reach a header under
# src/<FORBIDDEN>/, directly or through another header. Fails naming the
# file and the headers. Files whose path matches SKIP (e.g. tests, which
# may assemble what their library must not name) are not checked. The layers are those of CONVENTIONS.md: only the
# composition root (src/vesseld) names concrete node and hypervisor types.
string(REPLACE "," ";" DIRS "${DIRS}")
string(REPLACE "," "|" forbidden_re "${FORBIDDEN}")
set(checked 0)
separate_arguments(flags UNIX_COMMAND "${CXX_FLAGS}")
set(bad "")
foreach(dir IN LISTS DIRS)
  file(GLOB files "${dir}/*.cc" "${dir}/*.h" "${dir}/*/*.cc" "${dir}/*/*.h")
  foreach(f IN LISTS files)
    if(SKIP AND f MATCHES "${SKIP}")
      continue()
    endif()
    execute_process(
      COMMAND ${CXX} -std=c++20 ${flags} -DBOOST_ASIO_NO_DEPRECATED -Isrc -MM -x c++ ${f}
      OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
    math(EXPR checked "${checked} + 1")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${f}: cannot list its headers:\n${err}")
    endif()
    string(REGEX MATCHALL "(^|[ /])src/(${forbidden_re})/[^ \\\n]+" hits "${deps}")
    if(hits)
      string(APPEND bad "${f} reaches:${hits}\n")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "layering: ${bad}")
endif()
if(checked EQUAL 0)
  message(FATAL_ERROR "layering: no files found in ${DIRS}")
endif()
message(STATUS "layering: ${checked} files of ${DIRS} reach no src/{${FORBIDDEN}}/ header")
