# SPDX-License-Identifier: MIT
# `cpack -G DEB` in a shared build: one runtime package per shared library,
# named by Debian policy from its soname (libsframepp-format.so.0 ->
# libsframepp-format0), libsframepp-dev (headers, the .so links, CMake and
# pkg-config files) and sframe-tools (the `sframe` tool). Depends: the
# system libraries from dpkg-shlibdeps, our own packages at this exact
# version (our libraries are not in the shlibs database).
# The packages install under /usr, the libraries in Debian's multiarch
# directory (GNUInstallDirs: lib/x86_64-linux-gnu) and without RUNPATH
# (cmake/install.cmake): both follow from a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, as Debian's own CMake packaging does, so
# only such a build offers `cpack` (tests/install/deb.sh makes one).
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "Debian packages (cpack -G DEB): configure a build with -DCMAKE_INSTALL_PREFIX=/usr "
                 "(this one installs into ${CMAKE_INSTALL_PREFIX})")
  return()
endif()
set(CPACK_PACKAGE_NAME sframepp)
set(CPACK_PACKAGE_VENDOR "sframepp")
set(CPACK_PACKAGE_CONTACT "sframepp maintainers <sframepp@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "SFrame stack-trace format library")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Stripped: the debug info stays in the build tree.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps finds our own libraries here (and leaves them out of the
# generated Depends: the explicit ones below name them).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(_components)
set(_runtime)
if(BUILD_SHARED_LIBS)
  # layer target -> the layers it links (their runtime packages)
  set(_deps_sframepp_format "")
  set(_deps_sframepp_unwind sframepp_format)
  set(_deps_sframepp sframepp_format sframepp_unwind)
  set(_deps_sframepp_cfi sframepp sframepp_format sframepp_unwind)
  set(_deps_sframepp_process sframepp_cfi sframepp sframepp_format sframepp_unwind)
  set(_deps_sframepp_backtrace sframepp_format sframepp_unwind)
  foreach(t ${SFRAMEPP_LAYERS})
    get_target_property(_out ${t} OUTPUT_NAME)
    if(NOT _out)
      set(_out ${t})
    endif()
    set(_c lib${_out}0)
    string(TOUPPER ${_c} _C)
    list(APPEND _components ${_c})
    list(APPEND _runtime ${_c})
    set(CPACK_DEBIAN_${_C}_PACKAGE_NAME ${_c})
    set(CPACK_COMPONENT_${_C}_DESCRIPTION "sframepp: lib${_out}.so.0 (SFrame stack-trace format)")
    set(_d)
    foreach(dep ${_deps_${t}})
      get_target_property(_dout ${dep} OUTPUT_NAME)
      if(NOT _dout)
        set(_dout ${dep})
      endif()
      list(APPEND _d lib${_dout}0)
    endforeach()
    set(CPACK_COMPONENT_${_C}_DEPENDS ${_d})
  endforeach()
endif()
list(APPEND _components dev)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsframepp-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "sframepp: headers, CMake package and pkg-config files")
set(CPACK_COMPONENT_DEV_DEPENDS ${_runtime})
# The .pc and CMake files of the static layers name these (pkg-config
# --static, find_dependency).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libelf-dev, libdw-dev, pkg-config")
if(SFRAMEPP_TOOLS)
  list(APPEND _components tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME sframe-tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
  set(CPACK_COMPONENT_TOOLS_DESCRIPTION "sframepp: the sframe tool (dump, verify, gen, lookup, stat, merge, stack)")
  # The tool carries the layers' code itself (sframe_tool_layers in
  # CMakeLists.txt: a static link, for its start-up time), so it depends on
  # none of our runtime packages; dpkg-shlibdeps names the system ones.
endif()
set(CPACK_COMPONENTS_ALL ${_components})
include(CPack)
