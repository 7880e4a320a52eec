# Regenerates docs/compatibility.md into a temporary file and fails if it differs.
execute_process(COMMAND ${PYTHON} ${ROOT}/scripts/gen_compatibility.py ${ROOT} ${ENTRIES}
                        ${CMAKE_CURRENT_BINARY_DIR}/compatibility.md.new RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen_compatibility.py failed")
endif()
file(READ ${ROOT}/docs/compatibility.md committed)
file(READ ${CMAKE_CURRENT_BINARY_DIR}/compatibility.md.new fresh)
if(NOT committed STREQUAL fresh)
  message(FATAL_ERROR "docs/compatibility.md is stale; regenerate it with:\n"
          "  python3 scripts/gen_compatibility.py . build/gen/abi/entry_points.inc docs/compatibility.md")
endif()
