# Install rules: `make install` (scripts/install.sh) or
# `cmake --install build/release [--prefix P]`, DESTDIR honoured. The layout
# is documented in docs/operations.md ("Layout"); tests/deploy/install_check.sh
# checks it. Everything under the prefix is read-only at run time: what
# vesseld writes lives in /var/lib/vessel, /var/cache/vessel and /run/vessel,
# which the systemd units create (StateDirectory=, CacheDirectory=, ...).
#
#   bin/                  vessel, vesseld, vessel-gateway
#   lib/vessel/           vessel-memfile-shim.so (preloaded into jailed QEMUs),
#                         vessel-templates (builds the built-in templates),
#                         node-entrypoint (the node image's entrypoint),
#                         vessel-volume-server (a volume mount's file server)
#   lib/systemd/system/   vesseld.service (one machine), vessel-api.service,
#                         vessel-node.service
#   share/vessel/         kernel/vmlinux, images/{minimal,debian}.ext4,
#                         templates/*/template.json, config/*.env (examples),
#                         console/ (the web console's files, docs/console.md)

install(TARGETS vessel vesseld vessel-gateway RUNTIME DESTINATION bin)
install(TARGETS vessel_memfile_shim LIBRARY DESTINATION lib/vessel)
install(TARGETS vessel-volume-server RUNTIME DESTINATION lib/vessel)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/systemd/vessel-templates
                 ${PROJECT_SOURCE_DIR}/deploy/docker/node-entrypoint DESTINATION lib/vessel)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/guest/templates/ DESTINATION share/vessel/templates
        FILES_MATCHING PATTERN "template.json")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/systemd/config/ DESTINATION share/vessel/config)
install(DIRECTORY ${CMAKE_BINARY_DIR}/console/ DESTINATION share/vessel/console)

# The units and the template script name /usr/local, the default prefix;
# under another prefix they are rewritten to it as they are installed.
set(VESSEL_UNITS vesseld.service vessel-api.service vessel-node.service)
install(CODE "
  set(units \"${VESSEL_UNITS}\")
  set(dest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
  file(MAKE_DIRECTORY \"\${dest}\")
  foreach(u IN LISTS units)
    file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/\${u}\" text)
    string(REPLACE \"/usr/local\" \"\${CMAKE_INSTALL_PREFIX}\" text \"\${text}\")
    message(STATUS \"Installing: \${dest}/\${u}\")
    file(WRITE \"\${dest}/\${u}\" \"\${text}\")
  endforeach()
  set(t \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/vessel/vessel-templates\")
  file(READ \"\${t}\" text)
  string(REPLACE \"/usr/local\" \"\${CMAKE_INSTALL_PREFIX}\" text \"\${text}\")
  file(WRITE \"\${t}\" \"\${text}\")
")

# The guest kernel and images are built outside CMake (scripts/build.sh,
# cached under $VESSEL_CACHE_DIR); the build records their paths in
# artifacts.env, read here at install time. They are copied sparse: the
# debian image is a 1 GiB file of which about a third is data.
install(CODE "
  set(env \"${PROJECT_BINARY_DIR}/artifacts.env\")
  if(NOT EXISTS \"\${env}\")
    message(FATAL_ERROR \"\${env} is missing: run `make build` (scripts/build.sh) first; it builds the guest kernel and images\")
  endif()
  file(STRINGS \"\${env}\" lines)
  foreach(l IN LISTS lines)
    if(l MATCHES \"^(VESSEL_[A-Z_]+)=(.*)$\")
      set(\${CMAKE_MATCH_1} \"\${CMAKE_MATCH_2}\")
    endif()
  endforeach()
  set(share \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/share/vessel\")
  file(MAKE_DIRECTORY \"\${share}/kernel\" \"\${share}/images\")
  foreach(pair \"VESSEL_KERNEL;kernel/vmlinux\" \"VESSEL_MINIMAL_IMAGE;images/minimal.ext4\"
               \"VESSEL_DEBIAN_IMAGE;images/debian.ext4\")
    list(GET pair 0 var)
    list(GET pair 1 to)
    if(NOT EXISTS \"\${\${var}}\")
      message(FATAL_ERROR \"\${var} (\${\${var}}) is missing: run `make build`\")
    endif()
    message(STATUS \"Installing: \${share}/\${to}\")
    execute_process(COMMAND cp --sparse=always --preserve=mode \"\${\${var}}\" \"\${share}/\${to}\"
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR \"cannot copy \${\${var}} to \${share}/\${to}\")
    endif()
  endforeach()
")
