# Test tiers: every CTest test carries labels that say which tier runs it.
#
#   fast    `make check`, the everyday tier: unit tests, the conformance suite on the memory and
#           SQLite stores, the SQLite store tests, the integration tests on SQLite that are not slow
#           by nature, the OpenAPI lint, the layering fences, the thread-safety analysis.
#   (none)  only `make test`, which runs every test whatever its labels.
#
# Kind labels say what a test needs or is: unit, integration, pg (a PostgreSQL cluster), nodes,
# clients, docs, browser, deploy, soak, fuzz, openapi, layering, analysis, bench.
#
# Which discovered GoogleTest cases are slow by nature is kept in one committed file,
# tests/tiers.cmake, with the seconds each took: ichido_discover_tests() below applies it when
# CTest reads the tests (a slow case loses `fast`, gains `slow`, and gets its COST so that
# `ctest -j` starts it early).
include(GoogleTest)
set(ICHIDO_TIERS_FILE ${PROJECT_SOURCE_DIR}/tests/tiers.cmake)

# ichido_discover_tests(TARGET LABELS label... [TEST_PREFIX p] [TEST_FILTER f] [PROPERTIES ...])
#   gtest_discover_tests() of TARGET, each case labelled LABELS (and `slow` instead of `fast`
#   when tests/tiers.cmake names it). PROPERTIES are passed on; LABELS must not be among them.
function(ichido_discover_tests target)
  cmake_parse_arguments(arg "" "TEST_PREFIX;TEST_FILTER" "LABELS;PROPERTIES" ${ARGN})
  # One list (and one tiers file) per call: a target may be discovered twice (a filter, a prefix).
  string(MAKE_C_IDENTIFIER "${target}_${arg_TEST_PREFIX}_${arg_LABELS}_tests" list)
  set(extra)
  if(arg_TEST_PREFIX)
    list(APPEND extra TEST_PREFIX ${arg_TEST_PREFIX})
  endif()
  if(arg_TEST_FILTER)
    list(APPEND extra TEST_FILTER ${arg_TEST_FILTER})
  endif()
  if(arg_PROPERTIES)
    list(APPEND extra PROPERTIES ${arg_PROPERTIES})
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_LIST ${list} ${extra})
  # Read by CTest after the file gtest_discover_tests() writes (TEST_INCLUDE_FILES keeps the
  # order), so ${list} holds the discovered names.
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${list}_tiers.cmake)
  file(WRITE ${file} "include(\"${ICHIDO_TIERS_FILE}\")\n"
                     "ichido_apply_tiers(\"\${${list}}\" \"${arg_LABELS}\")\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()

# ichido_test_labels(TEST label...): the labels of a test made with add_test(), and, when
# tests/tiers.cmake names it, `slow` instead of `fast` and its COST.
function(ichido_test_labels test)
  include(${ICHIDO_TIERS_FILE})
  ichido_tier_of(${test} "${ARGN}" labels cost)
  set_tests_properties(${test} PROPERTIES LABELS "${labels}")
  if(cost)
    set_tests_properties(${test} PROPERTIES COST ${cost})
  endif()
endfunction()
