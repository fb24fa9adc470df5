# LoRA adapters (GGUF and PEFT): merged-weight reference, forms, lever vs
# MODEL+ADAPTER, malformed adapters, the kl self-flag.
kld_add_test(NAME test_lora SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lora.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_lora kldeval)
