# Configures and builds the CMake project SOURCE_DIR in WORK_DIR/build against the edgesgd
# installed in PREFIX (found through find_package only), with the C++ compiler CXX_COMPILER
# (the one that built the package), then runs its program PROGRAM with WORK_DIR as the working
# directory. Invoked with -DPREFIX, -DSOURCE_DIR, -DWORK_DIR, -DPROGRAM, -DCXX_COMPILER.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
                        -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                COMMAND_ERROR_IS_FATAL ANY)
# Two jobs, like the rest of the test suite: these projects are small.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 2
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK_DIR}/build/${PROGRAM} WORKING_DIRECTORY ${WORK_DIR}
                COMMAND_ERROR_IS_FATAL ANY)
