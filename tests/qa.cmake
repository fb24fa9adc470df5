# The QA helper's end-to-end CLI checks: bad flags, bad files, unsafe output paths.
kld_add_test(NAME test_cli_qa SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_qa.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_qa kldeval)
