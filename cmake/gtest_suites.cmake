# One ctest test per GoogleTest suite: all cases of a suite run in one process. A test process
# that links LibTorch spends about half a second starting up, so a ctest test per case (what
# gtest_discover_tests gives) spent minutes of the suite's time on start-up alone.
#
#   distml_gtest_suites(TARGET [PREFIX p] [TIMEOUT seconds])
#
# After each build of TARGET, cmake/list_gtest_suites.cmake asks the binary for its tests
# (--gtest_list_tests) and writes one add_test per suite, with --gtest_filter=SUITE.*, into a
# file that ctest includes. The names are PREFIX + suite, e.g. "train.ModelsOptimizersWorlds/
# TrainerEquivalence"; `ctest -R train.` selects an area and the output names every case.
set(DISTML_LIST_GTEST_SUITES ${CMAKE_CURRENT_LIST_DIR}/list_gtest_suites.cmake)

function(distml_gtest_suites target)
  cmake_parse_arguments(arg "" "PREFIX;TIMEOUT" "" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  set(suites "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D exe=$<TARGET_FILE:${target}> -D out=${suites}
            -D prefix=${arg_PREFIX} -D timeout=${arg_TIMEOUT}
            -D workdir=${CMAKE_CURRENT_BINARY_DIR} -P ${DISTML_LIST_GTEST_SUITES}
    BYPRODUCTS ${suites}
    VERBATIM)
  # ctest reads this at start: the suites once built, with what each needs of the machine
  # (cmake/test_resources.cmake, read then), else one test that says so.
  set(include "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  file(WRITE ${include}
       "if(EXISTS \"${suites}\")\n  include(\"${CMAKE_CURRENT_FUNCTION_LIST_DIR}/test_resources.cmake\")\n"
       "  include(\"${suites}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include})
endfunction()
