# `kldeval demo` from an empty folder (HOME and the run database kept in the
# build tree), its --help, the data-file lookup, and the demo again from a
# copy installed with `cmake --install --prefix` under the build tree.
kld_add_test(NAME test_cli_demo SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_demo.c
             ARGS $<TARGET_FILE:kldeval> ${CMAKE_COMMAND} ${CMAKE_SOURCE_DIR} TIMEOUT 300)
add_dependencies(test_cli_demo kldeval)
