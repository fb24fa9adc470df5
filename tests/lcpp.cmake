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
# tests/data/lcpp-oracle/converter: the Hugging Face checkpoints llama.cpp's
# converter turned into its GGUFs (the generator, run by hand: see the README
# there), and kldeval's own conversion of them against llama.cpp's files.
set(KLD_TEST_CONVERTED_HF_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_converted_hf.c
    ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_oracle_families.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_qwen3next_hf.c
    ${CMAKE_CURRENT_SOURCE_DIR}/synth_gemma4_hf.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_glm4moe_hf.c
    ${CMAKE_CURRENT_SOURCE_DIR}/synth_deepseek3_hf.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_gptoss_hf.c
    ${KLD_TEST_FORWARD_SOURCES})
add_executable(lcpp_converter_gen ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_converter_gen.c ${KLD_TEST_CONVERTED_HF_SOURCES})
target_link_libraries(lcpp_converter_gen PRIVATE kld_testlib)
kld_add_test(NAME test_lcpp_converter SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lcpp_converter.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c ${KLD_TEST_CONVERTED_HF_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_lcpp_oracle SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lcpp_oracle.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lcpp_oracle_families.c ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 60)
