# Tests of src/tensor: the type table and kernels against llama.cpp's
# dequant/quant oracle, and the half/bfloat16 conversions. test_tensor runs
# twice: with the dispatched (AVX2) kernels and with KLD_KERNELS=ref.
kld_add_test(NAME test_tensor SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tensor.c LABELS tensor)
add_test(NAME test_tensor_kernels_ref COMMAND test_tensor WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_tensor_kernels_ref PROPERTIES
  ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLD_KERNELS=ref" LABELS tensor)
kld_add_test(NAME test_tensor_half SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tensor_half.c
  LABELS tensor)
# The read-only block types (i-quants, ternary, mxfp4) against
# tests/data/zoo_iq.gguf (tools/zoo_extend.py), the GGUF reader and the
# engine's weight GEMM; also with KLD_KERNELS=ref.
kld_add_test(NAME test_tensor_iq SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tensor_iq.c LABELS tensor)
add_test(NAME test_tensor_iq_kernels_ref COMMAND test_tensor_iq WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_tensor_iq_kernels_ref PROPERTIES
  ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLD_KERNELS=ref" LABELS tensor)
