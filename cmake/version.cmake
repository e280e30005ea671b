# The git commit is baked into the binary for `fak --version`.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  OUTPUT_VARIABLE FAK_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT FAK_GIT_COMMIT)
  set(FAK_GIT_COMMIT "unknown")
endif()
