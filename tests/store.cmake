# Tests of src/store: dump v1/v2 (writer, reader, resume, a full disk), the
# dump reader's bad-input corpus (derived at test time from a valid dump).
kld_add_test(NAME test_store_dump SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_store_dump.c
             LABELS store)
kld_add_test(NAME test_bad_dump SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_dump.c
             LABELS parsers)
