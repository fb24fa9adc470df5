# Session levers: parsing, reference-value identity, KV quantization and
# act=q8 against llama.cpp, decode == prefill, online attention.
kld_add_test(NAME test_levers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_levers.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 300)
kld_add_test(NAME test_cli_levers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_levers.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_levers kldeval)
# KV schemes beyond llama.cpp's blocks: MLX groups, the rotated quantizer,
# kv_config.json (test_kv_schemes); on a model: maps, kv_start, invariance (test_kv_cache).
kld_add_test(NAME test_kv_schemes SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kv_schemes.c TIMEOUT 60)
kld_add_test(NAME test_kv_cache SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kv_cache.c TIMEOUT 120)
