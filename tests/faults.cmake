# Allocation-failure injection (test_faults.c): every allocation of
# kldeval's own code goes through the test's counters (--wrap), and each one
# fails in turn. Label "faults"; .ci/run runs it under ASan + UBSan too.
kld_add_test(NAME test_faults SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_faults.c
             ${CMAKE_CURRENT_SOURCE_DIR}/lora_fixture.c ${KLD_TEST_FORWARD_SOURCES}
             LABELS faults TIMEOUT 600)
target_link_libraries(test_faults PRIVATE kld_db_fixture)
target_link_options(test_faults PRIVATE
  "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=aligned_alloc,--wrap=posix_memalign")
