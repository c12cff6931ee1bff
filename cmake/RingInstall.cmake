# SPDX-License-Identifier: Apache-2.0
#
# What `cmake --install` puts where, the way Debian lays a package out (GNUInstallDirs):
#
#   component  Debian package       files
#   runtime    libring0             lib/libring.so.0 (soname) and its versioned file
#   dev        libring-dev          include/ring.h, lib/libring.so, lib/libring.a,
#                                   lib/pkgconfig/ring.pc, lib/cmake/Ring/*.cmake
#   tools      ringmaster-tools     bin/ringrun, bin/ringctl, bin/ringsim
#   daemon     ringmaster-daemon    bin/ringd, libexec/ringmaster/ringd-exec, the unit, the
#                                   example config, the operator's guide
#                                   (cmake/RingInstallService.cmake)
#   python     python3-ringmaster   the ringmaster package (worker/python/CMakeLists.txt)
#
# lib is ${CMAKE_INSTALL_LIBDIR}: lib/x86_64-linux-gnu under /usr on Debian. Included once
# from the top-level CMakeLists.txt after every target exists; cmake/RingPackage.cmake
# turns the components into .debs.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ringd runs ringd-exec (as root) from this path, fixed at build time: never from PATH
# (scheduler/backend/local/local_config.c). The build tree's own, next to ringd, comes first
# there.
set(RING_EXEC_DIR ${CMAKE_INSTALL_LIBEXECDIR}/ringmaster)
# The local backend's settings (scheduler/backend/local/local_config.c) look it up, in
# ring_sched.
if(TARGET ring_sched)
  target_compile_definitions(ring_sched PRIVATE
    RINGD_EXEC_PATH="${CMAKE_INSTALL_FULL_LIBEXECDIR}/ringmaster/ringd-exec")
endif()

install(TARGETS ring
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS ring_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/worker/libring/include/ring.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS ringrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
foreach(tool ringctl ringsim)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()
if(TARGET ringd)
  install(TARGETS ringd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
  # 0755 and root's (the package's files are): ringd refuses a ringd-exec, or a directory
  # above it, that others than root and its own user may change (server/main.c).
  install(TARGETS ringd-exec RUNTIME DESTINATION ${RING_EXEC_DIR} COMPONENT daemon)
  include(${CMAKE_CURRENT_LIST_DIR}/RingInstallService.cmake)
endif()

# ---------------------------------------------------------------------------------------
# What a program that links libring.a needs besides it: the libraries of the optional
# backends this build enabled, read from the imported targets libring links (their files,
# and PMIx's rpath, which its own pmix.pc asks for). RingConfig.cmake gives Ring::ring_static
# the files; ring.pc's Libs.private the same as flags (-L<dir> -l<name>, no -L for a folder
# the linker searches anyway). libring.so records them itself (NEEDED).
set(_ring_deps PkgConfig::SODIUM)
if(RING_HAVE_PMIX)
  list(APPEND _ring_deps PkgConfig::RING_PMIX)
endif()
if(RING_HAVE_MPI)
  list(APPEND _ring_deps MPI::MPI_C)
endif()
if(RING_HAVE_CUDA)
  list(APPEND _ring_deps CUDA::cudart)
endif()
set(RING_PRIVATE_FILES)
set(RING_PRIVATE_FLAGS -pthread -lm)
foreach(dep IN LISTS _ring_deps)
  foreach(prop INTERFACE_LINK_LIBRARIES IMPORTED_LOCATION)
    get_target_property(files ${dep} ${prop})
    if(files)
      list(APPEND RING_PRIVATE_FILES ${files})
    endif()
  endforeach()
  get_target_property(opts ${dep} INTERFACE_LINK_OPTIONS)
  if(opts)
    list(APPEND RING_PRIVATE_FLAGS ${opts})
  endif()
endforeach()
if(RING_HAVE_CUDA)
  list(APPEND RING_PRIVATE_FILES ${RING_NCCL_LIBRARY})
endif()
foreach(file IN LISTS RING_PRIVATE_FILES)
  get_filename_component(dir ${file} DIRECTORY)
  get_filename_component(name ${file} NAME_WE)
  string(REGEX REPLACE "^lib" "" name ${name})
  if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND RING_PRIVATE_FLAGS -L${dir})
  endif()
  list(APPEND RING_PRIVATE_FLAGS -l${name})
endforeach()
list(REMOVE_DUPLICATES RING_PRIVATE_FLAGS)
list(JOIN RING_PRIVATE_FLAGS " " RING_PC_LIBS_PRIVATE)

# ring.pc names the prefix it is installed under, which `cmake --install --prefix P` and
# CPack choose only at install time: the install step writes it from this template.
configure_file(${CMAKE_CURRENT_LIST_DIR}/ring.pc.in ${CMAKE_BINARY_DIR}/ring.pc.in @ONLY)
install(CODE "
  get_filename_component(_prefix \"\${CMAKE_INSTALL_PREFIX}\" ABSOLUTE)
  file(READ \"${CMAKE_BINARY_DIR}/ring.pc.in\" _pc)
  string(REPLACE \"%PREFIX%\" \"\${_prefix}\" _pc \"\${_pc}\")
  set(_out \"\$ENV{DESTDIR}\${_prefix}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/ring.pc\")
  message(STATUS \"Installing: \${_out}\")
  file(WRITE \"\${_out}\" \"\${_pc}\")
" COMPONENT dev)

# RingConfig.cmake finds its prefix from where it lies, so it needs no such step.
get_target_property(RING_SOVERSION ring SOVERSION)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/RingConfig.cmake.in
  ${CMAKE_BINARY_DIR}/RingConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ring
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
# 0.x: a minor release may change the API (semantic versioning), so only the same minor
# version is compatible; from 1.0 on, SameMajorVersion.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/RingConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/RingConfig.cmake ${CMAKE_BINARY_DIR}/RingConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ring COMPONENT dev)
