# Tests of the model and engine modules (owned by the engine helper).
kld_add_test(NAME test_forward SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 600)
kld_add_test(NAME test_engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_engine.c)
kld_add_test(NAME test_forward_synth SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_synth.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 600)
kld_add_test(NAME test_model SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_model.c
             ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_forward_variants SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_variants.c
             ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_forward_hybrid SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_hybrid.c
             ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_forward_deltanet SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_deltanet.c
             ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_forward_moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_moe.c
             ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_engine_batch SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_engine_batch.c)
kld_add_test(NAME test_qwen3next_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_qwen3next_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_qwen3next_hf.c ${KLD_TEST_FORWARD_SOURCES})
kld_add_test(NAME test_forward_gptoss SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_gptoss.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_forward_gemma4 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_gemma4.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lora_fixture.c ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_forward_qwen35 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_qwen35.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_qwen3next_hf.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_forward_glm4moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_glm4moe.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_forward_deepseek2 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_deepseek2.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
# attention=exact over long key ranges (tiled) against the one-pass result.
kld_add_test(NAME test_attention_long SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_attention_long.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 300)
kld_add_test(NAME test_glm4moe_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_glm4moe_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_glm4moe_hf.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_gptoss_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gptoss_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_gptoss_hf.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_deepseek3_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_deepseek3_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_deepseek3_hf.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_glm4moe_hf.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_qwen35_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_qwen35_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_qwen3next_hf.c ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
kld_add_test(NAME test_gemma4_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gemma4_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_gemma4_hf.c ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
