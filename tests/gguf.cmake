kld_add_test(NAME test_gguf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf.c LABELS parsers)
# every GGUF name kldeval reads or writes, against llama.cpp's tables (tests/data/gguf-names.txt)
kld_add_test(NAME test_gguf_names SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_names.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_qwen3next_hf.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_glm4moe_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_gptoss_hf.c ${CMAKE_CURRENT_SOURCE_DIR}/synth_deepseek3_hf.c
             ${CMAKE_CURRENT_SOURCE_DIR}/synth_gemma4_hf.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 120)
