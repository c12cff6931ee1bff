# SPDX-License-Identifier: Apache-2.0
#
# The service's files, each where Debian puts it, when the tree has it (each rule is
# guarded: the files come with the service half of issue 20):
#
#   contrib/systemd/ringd.service   lib/systemd/system/                  daemon
#   contrib/ringd.conf              /etc/ringmaster/ (a conffile)         daemon
#   docs/operating.md               share/doc/ringmaster/ (the unit's
#                                   Documentation=)                       daemon
#   contrib/completion/ringctl,     share/bash-completion/completions/    tools
#   contrib/completion/ringrun
#
# Included from cmake/RingInstall.cmake when ringd is built. Any other install rule that
# names no component goes to daemon too (CMakeLists.txt); contrib/man/ names its own.

set(_ring_contrib ${PROJECT_SOURCE_DIR}/contrib)

# Configuration goes to /etc under /usr (GNUInstallDirs' one exception), and otherwise to
# etc/ under the prefix, relative, so that `cmake --install --prefix DIR` keeps it in DIR.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_ring_etc ${CMAKE_INSTALL_FULL_SYSCONFDIR}/ringmaster)
else()
  set(_ring_etc ${CMAKE_INSTALL_SYSCONFDIR}/ringmaster)
endif()

if(EXISTS ${_ring_contrib}/systemd/ringd.service)
  # The unit names /usr/bin/ringd and /etc/ringmaster/ringd.conf, where the packages for
  # /usr put them; under another prefix it names where this build puts them instead.
  file(READ ${_ring_contrib}/systemd/ringd.service _ring_unit)
  string(REPLACE "/usr/bin/ringd" "${CMAKE_INSTALL_FULL_BINDIR}/ringd" _ring_unit "${_ring_unit}")
  string(REPLACE "/etc/ringmaster/" "${CMAKE_INSTALL_FULL_SYSCONFDIR}/ringmaster/" _ring_unit
         "${_ring_unit}")
  file(WRITE ${CMAKE_BINARY_DIR}/contrib/systemd/ringd.service "${_ring_unit}")
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${_ring_contrib}/systemd/ringd.service)
  install(FILES ${CMAKE_BINARY_DIR}/contrib/systemd/ringd.service
          DESTINATION lib/systemd/system COMPONENT daemon)
endif()

if(EXISTS ${_ring_contrib}/ringd.conf)
  install(FILES ${_ring_contrib}/ringd.conf DESTINATION ${_ring_etc} COMPONENT daemon)
  # dpkg keeps an admin's changes to it across upgrades (cmake/RingPackage.cmake).
  list(APPEND RING_DAEMON_CONFFILES ${CMAKE_INSTALL_FULL_SYSCONFDIR}/ringmaster/ringd.conf)
endif()

if(EXISTS ${PROJECT_SOURCE_DIR}/docs/operating.md)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/operating.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
          COMPONENT daemon)
endif()

foreach(tool ringctl ringrun)
  if(EXISTS ${_ring_contrib}/completion/${tool})
    install(FILES ${_ring_contrib}/completion/${tool}
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions COMPONENT tools)
  endif()
endforeach()
