# Saved arms end to end: dumps and llama.cpp base files written by the dump
# driver and scored by the KL driver (src/eval/arm_*.c, dump_driver.c).
kld_add_test(NAME test_saved SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_saved.c TIMEOUT 600)
kld_add_test(NAME test_cli_saved SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_saved.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_cli_saved kldeval)
# Hidden-state teachers (dump format 3): bit for bit the lockstep figures.
kld_add_test(NAME test_hidden SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hidden.c
             ${KLD_TEST_FORWARD_SOURCES} TIMEOUT 600)
