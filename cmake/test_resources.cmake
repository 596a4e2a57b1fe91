# What each test needs of the machine, for `make test`'s parallel ctest (one slot per core,
# ctest -j N). Measured on 2 cores with scripts/test_cpu_share.py (each test alone: its and its
# children's CPU seconds over its wall seconds): almost every test keeps one core busy or less,
# so two run side by side in about half the time; a few keep both busy and run alone.
#
#  - On every core (PROCESSORS 2, so alone on 2 cores): above 1.35 cores measured.
#  - Against a deadline (RESOURCE_LOCK deadline: never two at once): tests whose verdict is a
#    time limit (a stalled or lost rank named, a job ended, a process started within so many
#    seconds). They mostly wait; beside them runs at most one other test, on the other core.
#    They start first (COST: ctest starts the costliest first), one after another, so that
#    each waits beside other tests; declared order ran the last three alone at the end, about
#    a minute with a core idle.
#
# distml_test_resources_for(NAME) sets a test's properties: the gtest suites' lists call it
# when ctest reads them (cmake/list_gtest_suites.cmake), and distml_test_resources() at the
# end of a CMakeLists.txt for the tests it added.
set(DISTML_TESTS_ON_EVERY_CORE
    "^cli\\.ProgramConnectsWithTheLaunchersEngine\\.mpi$"
    "^cli\\.rl\\.OwnEnvironment$"
    "^cli\\.train\\.StrategiesMpiThreeRanks$"
    "^gloo\\.WorldSizes/GlooCollectives$"
    "^ml\\.LogisticRegression$"
    "^ml\\.RandomForest$"
    "^mpi\\.faults\\.late_communicator\\."
    "^mpi\\.faults\\.mismatched_lengths\\."
    "^mpi\\.tests\\."
    "^rl\\.Learning$"
    "^rl\\.VectorEnv$"
    "^rl\\.ExecEnv$"  # its environment processes must start within 0.5 s
    "^train\\.WorkersServers/PsBsp$"
    "^unit\\.HostsByRanks/HierarchicalAllreduce$"
    "^unit\\.WorldSizes/LocalCollectives$")
set(DISTML_TESTS_AGAINST_A_DEADLINE
    "^ops\\.restart\\.(never-joins|host-lost|stall\\.)"
    "^cli\\.SignalReachesEveryRank\\."
    "^cli\\.train\\.PipelineStall"
    "^cli\\.NetnsClusterRunsAcrossHostsAndCleansUp$"
    "^cli\\.slurm\\."
    "^unit\\.(Faults|TimelineExchange)$"
    "^gloo\\.GlooFaults$"
    "^mpi\\.faults\\."
    "^rl\\.(LostActor|ExecEnv)$")

# The longest of the others (25 s and more each, measured from a fresh clone): COST 500, so that
# they start right after the deadline tests and run beside them, instead of one of them
# starting last and leaving a core idle at the end (50-60 s of 800 before).
set(DISTML_LONG_TESTS
    "^cli\\.DocsCommandsRunAsShown$"
    "^cli\\.rl\\.(gloo|local|mpi)\\.np[23]$"
    "^cli\\.train\\.(PipelineMpi|StrategiesGlooFourRanks)$"
    "^cli\\.SimulateFromTheProfileOfARun$"
    "^cli\\.FirstHourMistakesGetOneClearError$"
    "^cli\\.fit\\.gloo\\.np3$"
    "^cli\\.CustomLoopBuildsAgainstTheInstalledPackage$"
    "^ml\\.sklearn_compare$")

# On emulated hosts (RESOURCE_LOCK netns: never two at once): tests that make network
# namespaces and check that none of theirs is left, counting every namespace of distml's.
set(DISTML_TESTS_ON_EMULATED_HOSTS
    "^cli\\.NetnsClusterRunsAcrossHostsAndCleansUp$"
    "^ops\\.restart\\.(host-lost|elastic\\.netns)$")

# Sets the properties the test `name` needs, if any.
function(distml_test_resources_for name)
  set(props "")
  set(locks "")
  foreach(pattern IN LISTS DISTML_TESTS_ON_EVERY_CORE)
    if(name MATCHES "${pattern}")
      list(APPEND props PROCESSORS 2)
      break()
    endif()
  endforeach()
  foreach(pattern IN LISTS DISTML_TESTS_AGAINST_A_DEADLINE)
    if(name MATCHES "${pattern}")
      list(APPEND locks deadline)
      list(APPEND props COST 1000)
      break()
    endif()
  endforeach()
  foreach(pattern IN LISTS DISTML_LONG_TESTS)
    if(name MATCHES "${pattern}" AND NOT locks)
      list(APPEND props COST 500)
      break()
    endif()
  endforeach()
  foreach(pattern IN LISTS DISTML_TESTS_ON_EMULATED_HOSTS)
    if(name MATCHES "${pattern}")
      list(APPEND locks netns)
      break()
    endif()
  endforeach()
  if(locks)  # a list as one value: set apart from `props`, which would flatten it
    set_tests_properties("${name}" PROPERTIES RESOURCE_LOCK "${locks}")
  endif()
  if(props)
    set_tests_properties("${name}" PROPERTIES ${props})
  endif()
endfunction()

# Every test the calling directory has added.
function(distml_test_resources)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    distml_test_resources_for(${test})
  endforeach()
endfunction()
