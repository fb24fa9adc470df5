kld_add_test(NAME test_gguf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf.c LABELS parsers)
