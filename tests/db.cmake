# Tests of the run database (src/db), `kldeval runs` / `kldeval report`, and
# the HTML report in headless Chromium (label "browser").
add_library(kld_db_fixture STATIC ${CMAKE_CURRENT_SOURCE_DIR}/db_fixture.c)
target_link_libraries(kld_db_fixture PUBLIC kld_testlib)
kld_add_test(NAME test_db SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_db.c TIMEOUT 300)
target_link_libraries(test_db PRIVATE kld_db_fixture)
kld_add_test(NAME test_report_html SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_report_html.c
             ARGS $<TARGET_FILE:kldeval> LABELS browser TIMEOUT 300)
target_link_libraries(test_report_html PRIVATE kld_db_fixture)
add_dependencies(test_report_html kldeval)
kld_add_test(NAME test_cli_runs SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_runs.c
             ARGS $<TARGET_FILE:kldeval>)
target_link_libraries(test_cli_runs PRIVATE kld_db_fixture)
add_dependencies(test_cli_runs kldeval)
kld_add_test(NAME test_db_cap SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_db_cap.c)
target_link_libraries(test_db_cap PRIVATE kld_db_fixture)
