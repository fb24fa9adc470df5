# llama.cpp --kl-divergence-base files (src/store/lcpp_base*.c): the oracle
# file, the encoder against llama.cpp's records, writer round trip and errors;
# the bad-input variants; llama-perplexity's final statistics block.
kld_add_test(NAME test_store_lcpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_store_lcpp.c
             LABELS parsers)
kld_add_test(NAME test_bad_lcpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_lcpp.c LABELS parsers)
kld_add_test(NAME test_report_llamacpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_report_llamacpp.c)

# tests/data/lcpp-oracle: the generator of its tiny GGUFs (run by hand, see
# the README there) and the test of the engine against llama.cpp's logits.
add_executable(lcpp_oracle_gen ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_oracle_gen.c
               ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_oracle_families.c ${KLD_TEST_FORWARD_SOURCES})
target_link_libraries(lcpp_oracle_gen PRIVATE kld_testlib)
kld_add_test(NAME test_lcpp_oracle SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lcpp_oracle.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_oracle_families.c ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 60)
