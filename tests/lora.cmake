# LoRA adapters (GGUF and PEFT): merged-weight reference, forms, lever vs
# MODEL+ADAPTER, malformed adapters, the kl self-flag.
kld_add_test(NAME test_lora SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lora.c
             ${KLD_TEST_FORWARD_SOURCES}
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_lora kldeval)
