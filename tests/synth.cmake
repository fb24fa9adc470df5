kld_add_test(NAME test_synth SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_synth.c)
