# cmake -DBUILD_DIR=<build folder> -DGENERATOR=<CMake generator> -DALLOWED=<t|library|header,...>
#       -DFORBIDDEN=<t|library|header,...> -P check_layers.cmake
# Fails, listing every probe that did not behave, when an allowed include does not compile, or a
# forbidden one compiles or fails for another reason than its header not being found. Two builds
# in all (one of the allowed probes, one of the forbidden, kept going past failures): each build
# costs a second of loading the build graph.
function(build_probes list out_rc out_text)
  string(REPLACE "," ";" _probes "${list}")
  set(_targets "")
  foreach(_probe IN LISTS _probes)
    string(REPLACE "|" ";" _fields "${_probe}")
    list(GET _fields 0 _target)
    list(APPEND _targets ${_target})
  endforeach()
  set(_keep_going "")
  if(GENERATOR MATCHES "Ninja")
    set(_keep_going -- -k 0)
  elseif(GENERATOR MATCHES "Makefiles")
    set(_keep_going -- -k)
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${_targets} ${_keep_going}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  set(${out_rc} ${_rc} PARENT_SCOPE)
  set(${out_text} "${_out}" PARENT_SCOPE)
endfunction()

build_probes("${ALLOWED}" _rc _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "an include the layers' rule allows does not compile:\n${_out}")
endif()

build_probes("${FORBIDDEN}" _rc _out)
string(REPLACE "," ";" _probes "${FORBIDDEN}")
set(_wrong "")
foreach(_probe IN LISTS _probes)
  string(REPLACE "|" ";" _fields "${_probe}")
  list(GET _fields 1 _library)
  list(GET _fields 2 _header)
  # gcc: "<header>: No such file or directory"; clang: "'<header>' file not found".
  string(REPLACE "." "\\." _escaped "${_header}")
  if(_out MATCHES "${_escaped}: No such file|'${_escaped}' file not found")
    message(STATUS "ok: ${_library} cannot include ${_header}")
  else()
    string(APPEND _wrong "\n  ${_library} can include ${_header}")
  endif()
endforeach()
if(_rc EQUAL 0 OR _wrong)
  message(FATAL_ERROR "the include paths let a library include a layer the rule forbids:${_wrong}"
                      "\n${_out}")
endif()
