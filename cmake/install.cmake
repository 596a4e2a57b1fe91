# `make install` (cmake --install): the `distml` command with what it reads at run time
# (PREFIX/share/distml: the report's plotting bundles, the tuned RL configs; found by
# core/installed_path.h), and the headers and the libraries a program of one's own needs for
# communication and data-parallel training, as a CMake package:
#   find_package(distml REQUIRED)
#   target_link_libraries(my_program PRIVATE distml::distml)
# examples/custom_loop is such a program; the tests build it against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Everything a user links: training, and every engine. Exported as distml::distml (the name
# `distml` itself is the command-line binary's).
add_library(distml_all INTERFACE)
target_link_libraries(distml_all INTERFACE distml_train distml_engines)
set_target_properties(distml_all PROPERTIES EXPORT_NAME distml)

set(distml_installed distml_all distml_core distml_comm distml_comm_mpi distml_comm_gloo
    distml_engines distml_data distml_nn distml_train distml_rl_core distml_torch_deps)
install(TARGETS ${distml_installed} EXPORT distmlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY src/distml DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
set(distml_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/distml)
install(EXPORT distmlTargets NAMESPACE distml:: DESTINATION ${distml_cmake_dir})
configure_package_config_file(cmake/distmlConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/distmlConfig.cmake
                              INSTALL_DESTINATION ${distml_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/distmlConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/distmlConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/distmlConfigVersion.cmake
        DESTINATION ${distml_cmake_dir})

install(TARGETS distml distml-torch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(distml_share ${CMAKE_INSTALL_DATADIR}/distml)
foreach(bundle vega/build/vega.min.js vega-lite/build/vega-lite.min.js)
  get_filename_component(bundle_dir ${bundle} DIRECTORY)
  install(FILES third_party/npm/node_modules/${bundle}
          DESTINATION ${distml_share}/node_modules/${bundle_dir} OPTIONAL)
endforeach()
install(DIRECTORY examples/rl/ DESTINATION ${distml_share}/examples/rl FILES_MATCHING PATTERN "*.toml")
