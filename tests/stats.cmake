# Tests of the KLD statistics (src/eval/kld_math*.c, stats*.c) and the
# reports (src/report/).
kld_add_test(NAME test_stats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stats.c)
kld_add_test(NAME test_stats_simd SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stats_simd.c)
kld_add_test(NAME test_stats_llamacpp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stats_llamacpp.c)
kld_add_test(NAME test_report SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_report.c)
# The block bootstrap's intervals: determinism, a real run, coverage.
kld_add_test(NAME test_bootstrap SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bootstrap.c)
