# Tests of src/quant: llama.cpp's recipes and imatrix quantization against
# llama-quantize's files, the policy grammar, threads, quantize-on-load;
# test_cli_quant drives `kldeval quantize`, `inspect MODEL@POLICY` and the
# kl self-gate between an on-load arm and the written file.
kld_add_test(NAME test_quant SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant.c LABELS quant)
kld_add_test(NAME test_cli_quant SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_quant.c
             ARGS $<TARGET_FILE:kldeval> LABELS quant)
add_dependencies(test_cli_quant kldeval)
# our own imatrix (exact and with llama.cpp's numerics) against llama-imatrix's
# and the llama-quantize --imatrix files it leads to
kld_add_test(NAME test_imatrix_llamacpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_imatrix_llamacpp.c
             LABELS quant slow TIMEOUT 600)
# Hugging Face gemma2 / gemma3 / phi3 → GGUF: tensors, keys, logits, tokenizer
kld_add_test(NAME test_quant_hf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_hf.c
             ${KLD_TEST_FORWARD_SOURCES}
             LABELS quant TIMEOUT 300)
# Hugging Face Mixtral / Qwen2-MoE / Qwen3-MoE / OLMoE / LFM2 → GGUF: stacked
# experts, keys, logits; q8_0 conversion = quantizing the equivalent GGUF
kld_add_test(NAME test_quant_hf_moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_hf_moe.c
             ${CMAKE_CURRENT_SOURCE_DIR}/hf_roundtrip.c
             ${KLD_TEST_FORWARD_SOURCES}
             LABELS quant TIMEOUT 300)
