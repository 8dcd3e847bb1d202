# Installs the edgesgd build tree BUILD_DIR into a fresh PREFIX: the ctest fixture of the tests
# that build projects against the installed package. Invoked with -DBUILD_DIR and -DPREFIX.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
