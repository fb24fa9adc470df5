# Tests of the capability suite (src/cap/): scorers against the shipped
# references, the HumanEval sandbox, `kldeval cap score`.
kld_add_test(NAME test_cap_scorers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_scorers.c)
kld_add_test(NAME test_cap_bfcl SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_bfcl.c)
kld_add_test(NAME test_cap_sandbox SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_sandbox.c TIMEOUT 300)
kld_add_test(NAME test_cap_cli SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_cli.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_cli kldeval)
kld_add_test(NAME test_cap_chat SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_chat.c)
kld_add_test(NAME test_cap_run SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_run.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_run kldeval)
kld_add_test(NAME test_cap_hashhop SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_hashhop.c)
kld_add_test(NAME test_cap_db SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_db.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_db kldeval)
