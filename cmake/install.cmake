# SPDX-License-Identifier: MIT
# `cmake --install`: headers, libsframepp.a and libsframepp.so (codec, ELF,
# unwinder), libsframepp-cfi.a (SFrame from DWARF CFI: our reader, and the
# libdw reference), libsframepp-process.a
# (live processes: ptrace, remote memory, modules), libsframepp-backtrace.a
# (in-process backtrace), the `sframe` tool, a CMake package
# (find_package(sframepp) -> sframepp::sframepp, sframepp::static,
# sframepp::cfi, sframepp::process, sframepp::backtrace) and pkg-config files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(sframepp_shared PROPERTIES EXPORT_NAME sframepp)
set_target_properties(sframepp_static PROPERTIES EXPORT_NAME static)
set_target_properties(sframe_cfi PROPERTIES EXPORT_NAME cfi OUTPUT_NAME sframepp-cfi)
set_target_properties(sframe_process PROPERTIES EXPORT_NAME process OUTPUT_NAME sframepp-process)
set_target_properties(sframepp_backtrace PROPERTIES EXPORT_NAME backtrace OUTPUT_NAME sframepp-backtrace)
foreach(t sframe_cfi sframe_process sframepp_backtrace)
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

install(DIRECTORY include/sframe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(TARGETS sframepp_shared sframepp_static sframe_cfi sframe_process sframepp_backtrace EXPORT sframeppTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS sframe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(_cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/sframepp)
install(EXPORT sframeppTargets NAMESPACE sframepp:: DESTINATION ${_cfgdir})
configure_package_config_file(cmake/sframeppConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfig.cmake INSTALL_DESTINATION ${_cfgdir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sframeppConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfigVersion.cmake DESTINATION ${_cfgdir})

# Relocatable: the prefix is found from the .pc file's own folder, so
# `cmake --install --prefix ANYWHERE` gives working files.
file(RELATIVE_PATH SFRAMEPP_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
foreach(pc sframepp sframepp-cfi)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
