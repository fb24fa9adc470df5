# Tests of the capability suite (src/cap/): scorers against the shipped
# references, the HumanEval sandbox, `kldeval cap score`.
kld_add_test(NAME test_cap_scorers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_scorers.c)
kld_add_test(NAME test_cap_bfcl SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_bfcl.c)
kld_add_test(NAME test_cap_sandbox SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_sandbox.c TIMEOUT 300)
# Alone: its fork bomb fills nobody's process limit and it counts nobody's
# processes and /tmp scratch folders, which the other cap tests' HumanEval
# sandboxes (also run as nobody) would disturb and be disturbed by.
set_tests_properties(test_cap_sandbox PROPERTIES RUN_SERIAL ON)
kld_add_test(NAME test_cap_cli SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_cli.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_cli kldeval)
kld_add_test(NAME test_cap_chat SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_chat.c)
kld_add_test(NAME test_cap_run SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_run.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_run kldeval)
kld_add_test(NAME test_cap_hashhop SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_hashhop.c)
kld_add_test(NAME test_cap_db SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_db.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_db kldeval)
kld_add_test(NAME test_cap_shard SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_shard.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_shard kldeval)
kld_add_test(NAME test_cap_modes SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_modes.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_modes kldeval)
kld_add_test(NAME test_cap_gen SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_gen.c)
kld_add_test(NAME test_cap_sampler SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_sampler.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_cap_sampler kldeval)
# The langdetect port against Debian's python3-langdetect seeded 0 (the
# interpreter store.cmake also looks for: Debian's, where the package is).
find_program(KLD_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
kld_add_test(NAME test_cap_langdetect SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_langdetect.c
             ARGS $<IF:$<BOOL:${KLD_PYTHON3}>,${KLD_PYTHON3},python3>)
# The shipped capability data found by an installed copy from any folder.
add_test(NAME test_cap_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cap_install.sh
         ${CMAKE_BINARY_DIR} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_cap_install PROPERTIES LABELS "cap" TIMEOUT 600
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}")
