# Installation of everything around the binaries (systemd units, sysusers.d and
# tmpfiles.d entries, the default /etc/stagefrontier/sfd.conf, man pages, the
# Grafana dashboard). Install rules of binaries and libraries live next to
# their targets. The Debian packages (systemd/debian/, .ci/build-debs) are
# built from these rules.
include(GNUInstallDirs)

# Relative to the prefix, as Debian lays them out (/usr/lib/systemd/system...).
set(SF_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING "systemd unit directory, relative to the prefix")
set(SF_SYSUSERSDIR "lib/sysusers.d" CACHE STRING "sysusers.d directory, relative to the prefix")
set(SF_TMPFILESDIR "lib/tmpfiles.d" CACHE STRING "tmpfiles.d directory, relative to the prefix")
set(SF_SFD_INSTALL_DIR "${CMAKE_INSTALL_SBINDIR}" CACHE STRING "where sfd is installed, relative to the prefix")

set(_sf_units sfd.service sfd.socket sfd-query.socket)
set(_sf_src ${PROJECT_SOURCE_DIR}/systemd)
set(_sf_stage ${PROJECT_BINARY_DIR}/sf-install)

install(FILES ${_sf_src}/sysusers.d/stagefrontier.conf DESTINATION ${SF_SYSUSERSDIR} COMPONENT daemon)
install(FILES ${_sf_src}/tmpfiles.d/stagefrontier.conf DESTINATION ${SF_TMPFILESDIR} COMPONENT daemon)
# The Grafana dashboard of the Prometheus export (docs/OPERATIONS.md).
install(FILES ${_sf_src}/grafana/stagefrontier-dashboard.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/stagefrontier/grafana COMPONENT daemon)

# Man pages are installed compressed, as Debian policy asks; -n keeps the
# archives reproducible (no name or time stamp inside).
find_program(SF_GZIP gzip REQUIRED)
set(_sf_man_out)
foreach(_page sfd.8 sfctl.1)
  string(REGEX REPLACE ".*\\." "" _sec ${_page})
  add_custom_command(OUTPUT ${_sf_stage}/man/${_page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_sf_stage}/man
    COMMAND ${SF_GZIP} -9nc ${PROJECT_SOURCE_DIR}/docs/man/${_page} > ${_sf_stage}/man/${_page}.gz
    DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${_page}
    COMMENT "Compressing ${_page}")
  list(APPEND _sf_man_out ${_sf_stage}/man/${_page}.gz)
  install(FILES ${_sf_stage}/man/${_page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_sec}
          COMPONENT daemon)
endforeach()
add_custom_target(sf_manpages ALL DEPENDS ${_sf_man_out})

# Units and the config name absolute paths, so they are rewritten at install
# time for the prefix actually used (cmake --install --prefix, or /usr when
# the Debian packages are built). The prefix /usr keeps its config in /etc, as
# GNUInstallDirs does.
install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(_prefix STREQUAL \"/usr\")
    set(_etc /etc)
  else()
    set(_etc \"\${_prefix}/${CMAKE_INSTALL_SYSCONFDIR}\")
  endif()
  # Staging per destination: installs to other places may run at once, and
  # two installs to the same place write the same text.
  string(MD5 _tag \"\$ENV{DESTDIR}|\${_prefix}\")
  set(_dir \"${_sf_stage}/units-\${_tag}\")
  file(MAKE_DIRECTORY \"\${_dir}\")
  set(_unit_files)
  foreach(_unit ${_sf_units})
    file(READ \"${_sf_src}/\${_unit}\" _text)
    string(REPLACE \"/usr/sbin/sfd\" \"\${_prefix}/${SF_SFD_INSTALL_DIR}/sfd\" _text \"\${_text}\")
    string(REPLACE \"/etc/stagefrontier\" \"\${_etc}/stagefrontier\" _text \"\${_text}\")
    file(WRITE \"\${_dir}/\${_unit}\" \"\${_text}\")
    list(APPEND _unit_files \"\${_dir}/\${_unit}\")
  endforeach()
  file(INSTALL DESTINATION \"\${_prefix}/${SF_SYSTEMD_UNITDIR}\" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES \${_unit_files})
  file(REMOVE_RECURSE \"\${_dir}\")
  # An operator's edited config is never overwritten by cmake --install.
  if(EXISTS \"\$ENV{DESTDIR}\${_etc}/stagefrontier/sfd.conf\")
    message(STATUS \"Keeping: \$ENV{DESTDIR}\${_etc}/stagefrontier/sfd.conf\")
  else()
    file(INSTALL DESTINATION \"\${_etc}/stagefrontier\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES \"${_sf_src}/sfd.conf\")
  endif()
" COMPONENT daemon)
