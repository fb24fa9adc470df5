# Tests of the run database (src/db), `kldeval runs` / `kldeval report`, and
# the HTML report in headless Chromium (label "browser").
add_library(kld_db_fixture STATIC ${CMAKE_CURRENT_SOURCE_DIR}/db_fixture.c)
target_link_libraries(kld_db_fixture PUBLIC kld_testlib)
kld_add_test(NAME test_db SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_db.c TIMEOUT 300)
target_link_libraries(test_db PRIVATE kld_db_fixture)
