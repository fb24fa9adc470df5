# Tests of the model and engine modules (owned by the engine helper).
kld_add_test(NAME test_forward SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c TIMEOUT 600)
kld_add_test(NAME test_engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_engine.c)
kld_add_test(NAME test_forward_synth SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_synth.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c TIMEOUT 600)
kld_add_test(NAME test_model SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_model.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c)
kld_add_test(NAME test_forward_variants SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_variants.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c)
kld_add_test(NAME test_forward_hybrid SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_hybrid.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c)
kld_add_test(NAME test_forward_moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_moe.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_models.c ${CMAKE_CURRENT_SOURCE_DIR}/test_synth_models.c
             ${CMAKE_CURRENT_SOURCE_DIR}/test_ref_hybrid.c ${CMAKE_CURRENT_SOURCE_DIR}/test_forward_check.c)
