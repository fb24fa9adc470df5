kld_add_test(NAME test_kl SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kl.c)
# The full rand-llama comparison with llama.cpp (3 arms × 231 chunks): opt-in, run by CI.
add_test(NAME test_kl_full COMMAND test_kl full WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_kl_full PROPERTIES LABELS slow TIMEOUT 3000)
# The issue's corpus run with --arm-lever act=q8 against llama.cpp's 0.002137 (about a minute on
# 2 threads; also part of test_kl_full).
add_test(NAME test_kl_act_q8 COMMAND test_kl act-q8 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_kl_act_q8 PROPERTIES LABELS slow TIMEOUT 1200)
# Runs killed with SIGKILL at random moments resume to the uninterrupted
# result (kl --checkpoint/--resume, dump --resume).
add_test(NAME test_resume COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_resume.sh ${CMAKE_BINARY_DIR}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# (kill moments scale with measured runs; a sanitizer build's runs are ~10x longer)
if(KLD_SANITIZE)
  set(KLD_RESUME_TIMEOUT 1800)
else()
  set(KLD_RESUME_TIMEOUT 600)
endif()
set_tests_properties(test_resume PROPERTIES TIMEOUT ${KLD_RESUME_TIMEOUT} ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}")
