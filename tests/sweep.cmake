# Sweeps: `kldeval sweep` (precision groups, --budget) and `kl --sweep/--floor`.
kld_add_test(NAME test_cli_sweep SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_sweep.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_cli_sweep kldeval)
# `kldeval sweep --rank-by diff` (issue 33): the groups ranked by one diff pass's matrix errors.
kld_add_test(NAME test_sweep_diff SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sweep_diff.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_sweep_diff kldeval)
