# SPDX-License-Identifier: MIT
# `cmake --install`: the headers, one library per layer (libsframepp-format,
# libsframepp-unwind, libsframepp (ELF + C API), libsframepp-cfi,
# libsframepp-process, libsframepp-backtrace; .so.0 or .a by
# BUILD_SHARED_LIBS), the `sframe` tool (SFRAMEPP_TOOLS), a CMake package
#   find_package(sframepp [COMPONENTS format unwind sframepp cfi process backtrace])
# giving sframepp::LAYER and sframepp::sframepp (= sframepp::elf; the
# component `elf` is an alias of `sframepp`), and one
# pkg-config file per library. Install components, one Debian package each
# (cmake/package.cmake): lib<name>0 (a shared library), dev, tools.
include(CMakePackageConfigHelpers)

# Where an installed library finds the others it links (libsframepp ->
# libsframepp-unwind -> libsframepp-format): installed outside /usr, beside
# itself (RUNPATH $ORIGIN), so that a program linked with a prefix's
# libraries runs without LD_LIBRARY_PATH; under /usr (a distribution's
# package, CMAKE_INSTALL_PREFIX=/usr, as cmake/package.cmake wants) none, as
# Debian policy 10.2 forbids RUNPATH there, and the loader's default
# directories hold them all. Decided by the configured prefix: a build
# configured for /usr and installed elsewhere with --prefix gets none.
if(BUILD_SHARED_LIBS AND NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set_target_properties(${SFRAMEPP_LAYERS} PROPERTIES INSTALL_RPATH "$ORIGIN")
endif()

set(SFRAMEPP_DEV_COMPONENT dev)
# The whole include/sframe tree: one folder per library (its C++ headers and
# its C header sframe_LIBRARY.h), sframe.h (all the C headers), and the
# forwarding headers of the 0.1.0 paths (include/sframe/*.hpp, detail/).
install(DIRECTORY include/sframe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
foreach(t ${SFRAMEPP_LAYERS})
  get_target_property(_out ${t} OUTPUT_NAME)
  if(NOT _out)
    set(_out ${t})
  endif()
  install(TARGETS ${t} EXPORT sframeppTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib${_out}0 NAMELINK_COMPONENT dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
if(SFRAMEPP_TOOLS)
  install(TARGETS sframe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
endif()

set(_cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/sframepp)
install(EXPORT sframeppTargets NAMESPACE sframepp:: DESTINATION ${_cfgdir} COMPONENT dev)
set(SFRAMEPP_SHARED ${BUILD_SHARED_LIBS})
configure_package_config_file(cmake/sframeppConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfig.cmake INSTALL_DESTINATION ${_cfgdir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sframeppConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sframeppConfigVersion.cmake DESTINATION ${_cfgdir} COMPONENT dev)

# One .pc file per library. Relocatable: the prefix is found from the .pc
# file's own folder, so `cmake --install --prefix ANYWHERE` gives working
# files. No -std= in Cflags (the consumer chooses its standard, C99 for
# sframe.h); Libs.private names what a static archive needs (pkg-config
# --static), the C++ runtime included, so a C program can link it.
file(RELATIVE_PATH SFRAMEPP_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
set(_cxx_runtime "-lstdc++ -lm")
#             name                 description                                                   Requires               Requires.private  Libs.private
set(_pc_format "sframepp-format" "SFrame codec: decoder, validator, lookups, encoder" "" "" "${_cxx_runtime}")
set(_pc_unwind "sframepp-unwind" "SFrame unwinder core and DWARF CFI reader (no libelf, no libdw)" "sframepp-format" "" "${_cxx_runtime}")
set(_pc_sframepp "sframepp" "SFrame of ELF files (libelf) and the C API of sframe/sframe.h" "sframepp-unwind sframepp-format" "libelf" "${_cxx_runtime}")
set(_pc_cfi "sframepp-cfi" "SFrame generated from the DWARF CFI of ELF files" "sframepp" "libdw libelf" "${_cxx_runtime}")
set(_pc_process "sframepp-process" "Stacks of live processes (ptrace, remote memory) with SFrame" "sframepp-cfi" "libdw libelf" "${_cxx_runtime}")
set(_pc_backtrace "sframepp-backtrace" "In-process async-signal-safe backtrace with SFrame (libc and the C++ runtime only)" "sframepp-unwind" "" "${_cxx_runtime} -lpthread -ldl")
foreach(_l format unwind sframepp cfi process backtrace)
  list(GET _pc_${_l} 0 PC_NAME)
  list(GET _pc_${_l} 1 PC_DESCRIPTION)
  list(GET _pc_${_l} 2 PC_REQUIRES)
  list(GET _pc_${_l} 3 PC_REQUIRES_PRIVATE)
  list(GET _pc_${_l} 4 PC_LIBS_PRIVATE)
  configure_file(cmake/sframepp.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${PC_NAME}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${PC_NAME}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT dev)
endforeach()

# Packages of this project's own build only (not a parent project's).
if(PROJECT_IS_TOP_LEVEL)
  include(${CMAKE_CURRENT_LIST_DIR}/package.cmake)
endif()
