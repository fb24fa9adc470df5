# The Python package (python/kldeval) over the shared library, with Debian's
# python3 (numpy, torch): tests/python/test_kldeval.py.
add_test(NAME test_python COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_kldeval.py
         ${CMAKE_BINARY_DIR} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_python PROPERTIES LABELS "api" TIMEOUT 300 ENVIRONMENT
  "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLDEVAL_LIB=${CMAKE_BINARY_DIR}/libkldeval.so;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
