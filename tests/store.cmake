# Tests of src/store: dump v1/v2 (writer, reader, resume, a full disk), the
# dump reader's bad-input corpus (derived at test time from a valid dump),
# and scripts/dump_teacher.py's self-test read back by the C reader.
kld_add_test(NAME test_store_dump SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_store_dump.c
             LABELS store)
kld_add_test(NAME test_bad_dump SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_dump.c
             LABELS parsers)
# Debian's python3 (setup installs python3-numpy for it) before whatever is
# first on PATH (a pyenv or venv python may lack numpy).
find_program(KLD_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT KLD_PYTHON3)
  find_program(KLD_PYTHON3 NAMES python3)
endif()
if(NOT KLD_PYTHON3)
  set(KLD_PYTHON3 python3) # the test then fails, naming the missing interpreter
endif()
kld_add_test(NAME test_dump_python SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_dump_python.c
             ARGS ${KLD_PYTHON3})
