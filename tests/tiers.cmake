# Which tests are slow by nature, and how long each takes: read by CMake (ichido_test_labels) and by
# CTest (ichido_discover_tests), both in cmake/test_tiers.cmake.
#
# A test named here (a regular expression over the CTest name) is not in `make check`: it loses
# the label `fast` and gains `slow`. The number is its time in seconds on the 2-core machine the
# project is developed on, in a `ctest -j` run; it becomes the test's COST so that `ctest -j`
# starts the long ones first. A new test that takes more than ~5 s belongs here: `make test`
# prints the ten slowest tests at its end (scripts/slowest-tests).
set(ICHIDO_SLOW_TESTS
  # Stress and exhaustive tests of the embedded store and the server (also their pg. variants).
  "^KeyIndexTest\\.AWriterAReaderAndSnapshotsAtOnce$" 45
  "^SqlitePowerLossTest\\.CompletedOnceRecords" 30
  "^SqlitePowerLossTest\\.EveryAnsweredNumber" 23
  "^(pg\\.)?LocksTest\\.ThirtyTwoClientsFiftyRoundsNeverOverlap$" 30
  "^Backup\\.UnderLoadIsOneSnapshot" 25
  "^(pg\\.)?LocksTest\\.FiveThousandWaitersOnOneLock" 23
  "^SqliteStoreTest\\.CheckpointsRunBesideTheWriter" 14
  "^SmallFile\\.EveryFlippedBitIsRefused$" 12
  "^KeyTable\\.AgreesWithAMap" 9
  "^TlsReload\\.SighupServesTheNewCertificate" 9
  "^pg\\.OnceTest\\.ThousandKeysEightWorkers" 30
  # PostgreSQL failing under several nodes (each runs clusters of its own).
  "^PgFailure\\.PrimaryKilledAndSynchronousStandbyPromoted" 70
  "^PgFailure\\.NodesBehindPgBouncer" 50
  "^PgFailure\\.PostgresDownAndBackUnderLoad" 50
  "^PgFailure\\.ACommitWhoseAnswerIsLost" 45
  "^PgFailure\\.ASegmentSentBeforeTheLastSync" 45
  "^Nodes\\.ACutListenConnection" 20
  # Suites that run as one test: a client test file, the soaks, packaging, the browser, fuzzing.
  "^soak_quick$" 180
  "^soak_quick_pg$" 200
  "^clients_gas\\.gas$" 115
  "^clients_vba$" 95
  "^clients_python\\.packaging$" 55
  "^clients_node\\.client$" 27
  "^clients_python\\.client$" 25
  "^clients_node\\.scenarios$" 22
  "^clients_gas\\.readme$" 21
  "^clients_node_types$" 18
  "^deploy_package$" 120
  "^browser_dashboard$" 60
  "^browser_cors$" 40
  "^docs_readme_shell$" 40
  "^fuzz_build$" 290
  "^bench_one_conn$" 35
)

# ichido_tier_of(NAME LABELS OUT_LABELS OUT_COST): LABELS with `fast` replaced by `slow` when
# NAME is listed above, and its COST (empty when not listed).
function(ichido_tier_of name labels out_labels out_cost)
  set(cost "")
  set(slow ${ICHIDO_SLOW_TESTS})
  while(slow)
    list(POP_FRONT slow pattern seconds)
    if(name MATCHES "${pattern}")
      set(cost ${seconds})
      list(REMOVE_ITEM labels fast)
      list(APPEND labels slow)
      break()
    endif()
  endwhile()
  set(${out_labels} "${labels}" PARENT_SCOPE)
  set(${out_cost} "${cost}" PARENT_SCOPE)
endfunction()

# ichido_apply_tiers(TESTS LABELS): labels (and COST) for discovered tests, at CTest time.
function(ichido_apply_tiers tests labels)
  foreach(t IN LISTS tests)
    ichido_tier_of("${t}" "${labels}" l cost)
    if(cost)
      set_tests_properties("${t}" PROPERTIES LABELS "${l}" COST ${cost})
    else()
      set_tests_properties("${t}" PROPERTIES LABELS "${l}")
    endif()
  endforeach()
endfunction()
