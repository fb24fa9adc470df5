# bench/run's table and its rounds alternated with llama.cpp (bench/vs_llama.sh),
# on stand-in programs that print known figures: the benchmarks themselves are
# never run by ctest.
add_test(NAME test_bench_table COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_table.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_bench_table PROPERTIES ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}" TIMEOUT 60)
