# The public API (include/kld.h, src/api/): the installed package built
# against with pkg-config, its examples equal to the CLI.
add_test(NAME test_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_install PROPERTIES LABELS "api" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}")
