# LoRA adapters (GGUF and PEFT): merged-weight reference, forms, lever vs
# MODEL+ADAPTER, malformed adapters, the kl self-flag; inspect and quantize
# of MODEL+ADAPTER (the adapter merged into the written weights).
kld_add_test(NAME test_lora SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lora.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lora_fixture.c ${KLD_TEST_FORWARD_SOURCES}
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_lora kldeval)
kld_add_test(NAME test_lora_merge SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_lora_merge.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lora_fixture.c ${KLD_TEST_FORWARD_SOURCES}
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_lora_merge kldeval)
