# Run by distml_gtest_suites (cmake/gtest_suites.cmake) after a test binary is built: writes one
# add_test per GoogleTest suite of `exe` into `out`. In --gtest_list_tests output a suite is an
# unindented line "Suite." (a parametrised one "Prefix/Suite.", maybe followed by a comment) and
# its cases are the indented lines under it.
execute_process(COMMAND ${exe} --gtest_list_tests OUTPUT_VARIABLE listing
                RESULT_VARIABLE code ERROR_VARIABLE err TIMEOUT 60)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "${exe} --gtest_list_tests failed (${code}): ${err}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(tests "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.")
    set(name "${prefix}${CMAKE_MATCH_1}")
    string(APPEND tests
           "add_test([==[${name}]==] [==[${exe}]==] [==[--gtest_filter=${CMAKE_MATCH_1}.*]==])\n"
           "set_tests_properties([==[${name}]==] PROPERTIES TIMEOUT ${timeout} "
           "WORKING_DIRECTORY [==[${workdir}]==])\n"
           "distml_test_resources_for([==[${name}]==])\n")
  endif()
endforeach()
if(tests STREQUAL "")
  message(FATAL_ERROR "${exe} lists no tests")
endif()
file(WRITE "${out}" "${tests}")
