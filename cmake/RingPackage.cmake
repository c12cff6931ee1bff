# SPDX-License-Identifier: Apache-2.0
#
# Debian packages from the build tree, one per install component (cmake/RingInstall.cmake):
# `cpack` in the build folder, or `make package`, which configures build-deb/ for /usr.
#
#   libring0            the shared library
#   libring-dev         ring.h, libring.so, libring.a, ring.pc, RingConfig.cmake
#   ringmaster-tools    ringrun, ringctl, ringsim
#   ringmaster-daemon   ringd, ringd-exec (and the unit and config, contrib/systemd/)
#   python3-ringmaster  the ringmaster Python package, over libring0's library
#
# The packages install under CMAKE_INSTALL_PREFIX: ringd looks for ringd-exec at the path
# fixed when it was built, so a package laid out under another prefix would not find it.
# Debian's place is /usr; the default /usr/local is for packages a site builds for itself.
#
# Depends: dpkg-shlibdeps finds the libraries the binaries link (libsodium23, libpmix2,
# libmicrohttpd12, ...), except those no Debian package owns (CUDA and NCCL from NVIDIA's
# installer): those must be installed by hand, as for the build. What no ELF file says is
# stated below.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringmaster)
set(CPACK_PACKAGE_VENDOR Ringmaster)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Ring allreduce for training jobs, and a service that runs them")
set(RING_PACKAGE_MAINTAINER "Ringmaster developers <ringmaster@localhost>" CACHE STRING
    "The Maintainer field of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${RING_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# Stripped, as Debian ships binaries; the build tree keeps its debugging information.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file in libring0, so that packages built against it depend on it, and ldconfig
# run by its postinst and postrm (CPack adds them for a library under /usr/lib).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(RING_DEB_VERSION "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_COMPONENTS_ALL runtime dev tools python)
if(TARGET ringd)
  list(APPEND CPACK_COMPONENTS_ALL daemon)
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libring0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "Ringmaster's collective runtime (shared library)\n libring: ring allreduce, allgather and broadcast over TCP and shared memory,\n with Horovod's background engine (negotiation, tensor fusion, response cache).")

# libring.a's own needs (libsodium, and the backends this build enabled) are the -dev
# packages of what libring0 links; CUDA and NCCL have none in Debian.
set(_ring_dev_depends "libring0 (= ${RING_DEB_VERSION}), libsodium-dev")
if(RING_HAVE_PMIX)
  string(APPEND _ring_dev_depends ", libpmix-dev")
endif()
if(RING_HAVE_MPI)
  string(APPEND _ring_dev_depends ", libopenmpi-dev | mpi-default-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libring-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_ring_dev_depends}")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Ringmaster's collective runtime (development files)\n ring.h, libring.a, pkg-config's ring.pc and CMake's find_package(Ring).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME ringmaster-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "Ringmaster's command-line tools\n ringrun starts the ranks of a job; ringctl is the job service's client;\n ringsim replays a workload through the scheduler's policies.")

# ringd starts every job through ringrun.
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME ringmaster-daemon)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "ringmaster-tools (= ${RING_DEB_VERSION})")
# Its files under /etc (the example configuration) are conffiles, which dpkg keeps with an
# admin's changes across upgrades: cmake/RingInstallService.cmake lists their absolute
# paths in RING_DAEMON_CONFFILES.
if(RING_DAEMON_CONFFILES)
  list(JOIN RING_DAEMON_CONFFILES "\n" _ring_conffiles)
  file(WRITE ${CMAKE_BINARY_DIR}/debian/daemon/conffiles "${_ring_conffiles}\n")
  set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/debian/daemon/conffiles)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
endif()
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "Ringmaster's job service\n ringd: a REST daemon that queues, schedules and runs training jobs on this\n host, on Slurm or through mpirun; ringd-exec isolates each job as its user.")

# Python files only: no ELF for dpkg-shlibdeps. ringmaster/_install.py names libring0's
# library, whose path holds the architecture, so the package is not Architecture: all.
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-ringmaster)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "libring0 (= ${RING_DEB_VERSION}), python3 (>= 3.9), python3-numpy")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
    "Python and PyTorch bindings of Ringmaster's collective runtime\n The ringmaster package (import ringmaster; ringmaster.torch), Horovod's API\n over libring, and ringmaster.client for the job service's REST API.")

# Each package carries the license where Debian looks for it.
foreach(component IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER ${component} _c)
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE RENAME copyright COMPONENT ${component}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${_c}_PACKAGE_NAME})
endforeach()

include(CPack)
