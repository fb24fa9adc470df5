# The engine's SIMD kernel sets (AVX2, AVX-512) against the scalar reference.
kld_add_test(NAME test_engine_kernels SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_engine_kernels.c)
