# llama.cpp --kl-divergence-base files (src/store/lcpp_base*.c): the oracle
# file, the encoder against llama.cpp's records, writer round trip and errors;
# the bad-input variants; llama-perplexity's final statistics block.
kld_add_test(NAME test_store_lcpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_store_lcpp.c
             LABELS parsers)
kld_add_test(NAME test_bad_lcpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_lcpp.c LABELS parsers)
kld_add_test(NAME test_report_llamacpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_report_llamacpp.c)
