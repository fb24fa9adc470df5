kld_add_test(NAME test_cli_inspect SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_inspect.c
             ${KLD_TEST_FORWARD_SOURCES}
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_inspect kldeval)
kld_add_test(NAME test_cli_kl SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_kl.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_kl kldeval)
kld_add_test(NAME test_cli_engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_engine.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_engine kldeval)
kld_add_test(NAME test_cli_record SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_record.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_record kldeval)
# Paired verdicts: runs compare's block bootstrap (eval/bootstrap.c).
kld_add_test(NAME test_paired SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_paired.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_paired kldeval)
kld_add_test(NAME test_cli_strata SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_strata.c
             ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cli_strata kldeval)
# kl with two arms against one reference: the paired comparison and its gates.
kld_add_test(NAME test_kl_pair SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kl_pair.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_kl_pair kldeval)
