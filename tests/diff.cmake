# `kldeval diff` (issue 33): the engine's layer observer (bit-identical forward pass, chunk and
# thread invariance) and the per-layer error statistics on rand-llama and synthesized MoE and
# hybrid models and LoRA arms, through the library and the command line.
kld_add_test(NAME test_diff SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_diff.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lora_fixture.c ${KLD_TEST_FORWARD_SOURCES} ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_diff kldeval)
