# `kldeval serve` (src/serve/): servers on loopback started and stopped by
# the test, driven with Python's standard library (urllib, http.client).
add_test(NAME test_serve COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_serve.py $<TARGET_FILE:kldeval>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_serve PROPERTIES LABELS "serve" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1")
# 64 concurrent clients x 20 requests (good and malformed) on --parallel 8.
add_test(NAME test_serve_load COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_load.py
         $<TARGET_FILE:kldeval> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_serve_load PROPERTIES LABELS "serve" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1")
# kl --arm-endpoint against `kldeval serve` on loopback (issue 35 part 2).
add_test(NAME test_endpoint COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_endpoint.py $<TARGET_FILE:kldeval>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_endpoint PROPERTIES LABELS "serve" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1")
# The official OpenAI client from npm (tests/browser/node_modules, installed
# by tests/browser/setup.sh) against `kldeval serve`.
add_test(NAME test_serve_openai COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_openai.py
         $<TARGET_FILE:kldeval> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_serve_openai PROPERTIES LABELS "serve;node" TIMEOUT 300
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1")
