# Session levers: parsing, reference-value identity, KV quantization and
# act=q8 against llama.cpp, decode == prefill, online attention.
kld_add_test(NAME test_levers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_levers.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c TIMEOUT 300)
kld_add_test(NAME test_cli_levers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_levers.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_levers kldeval)
