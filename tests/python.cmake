# The Python package (python/kldeval) over the shared library, with Debian's
# python3 (numpy, torch): tests/python/test_kldeval.py.
set(KLD_PYTHON_ENV "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLDEVAL_LIB=${CMAKE_BINARY_DIR}/libkldeval.so;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
if(KLD_SANITIZE)
  # python3 is not built with ASan: its runtime must be loaded first for the
  # instrumented libkldeval.so; leaks are not checked (the interpreter's own
  # would be reported).
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE KLD_LIBASAN OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND KLD_PYTHON_ENV "LD_PRELOAD=${KLD_LIBASAN}" "ASAN_OPTIONS=detect_leaks=0")
endif()
add_test(NAME test_python COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_kldeval.py
         ${CMAKE_BINARY_DIR} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_python PROPERTIES LABELS "api" TIMEOUT 300 ENVIRONMENT "${KLD_PYTHON_ENV}")
