# The public API (include/kld.h, src/api/): the installed package built
# against with pkg-config, its examples equal to the CLI. In a sanitizer
# build the examples are compiled with the same sanitizers (the installed
# library needs their runtime).
if(KLD_SANITIZE)
  set(KLD_EXAMPLE_CFLAGS "-fsanitize=address,undefined")
else()
  set(KLD_EXAMPLE_CFLAGS "")
endif()
add_test(NAME test_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} "${KLD_EXAMPLE_CFLAGS}" WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_install PROPERTIES LABELS "api" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}")
