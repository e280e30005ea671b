# The git commit is baked into the binary for `fak --version`. It is re-read on every build (not only
# at configure time) and the header is rewritten only when it changes, so nothing rebuilds needlessly.
set(FAK_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
add_custom_target(fak_git_commit
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DOUT=${FAK_GENERATED_DIR}/fak_git_commit.h
          -P ${CMAKE_SOURCE_DIR}/cmake/write_git_commit.cmake
  BYPRODUCTS ${FAK_GENERATED_DIR}/fak_git_commit.h
  COMMENT "Reading git commit")
