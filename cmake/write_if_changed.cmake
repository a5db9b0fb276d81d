# write_if_changed.cmake — runtime_write_if_changed(<file> <content>): the one way our build-time generators
# (embed_prelude.cmake, embed_dvpp_kernels.cmake) write their outputs.
#
# The content goes to a temporary of this run's own, which is renamed over <file> (atomic): a build that runs the
# rule twice at once never compiles a half-written file. An unchanged <file> is left alone (its timestamp too), so
# dependants do not rebuild.
function(runtime_write_if_changed file content)
  string(RANDOM LENGTH 12 salt)
  set(tmp "${file}.${salt}.tmp")
  file(WRITE "${tmp}" "${content}")
  if(EXISTS "${file}")
    file(SHA256 "${file}" old)
    file(SHA256 "${tmp}" new)
    if(old STREQUAL new)
      file(REMOVE "${tmp}")
      return()
    endif()
  endif()
  file(RENAME "${tmp}" "${file}")
endfunction()
