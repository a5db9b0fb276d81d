# cmake/acl_install.cmake — the CANN-shaped install tree of the AscendCL face (included by the top-level CMakeLists.txt).
#
# `cmake --install build --prefix P` lays out, next to the project's own lib/ and include/:
#   P/<RUNTIME_ACL_TOOLKIT_DIR>/set_env.sh          the environment script applications source (cmake/acl_set_env.sh)
#   P/<RUNTIME_ACL_TOOLKIT_DIR>/latest -> <version>
#   P/<RUNTIME_ACL_TOOLKIT_DIR>/<version>/
#     include/acl/{acl.h,acl_base.h,acl_rt.h,...,ops/acl_dvpp.h}  include/hccl/{hccl.h,hccl_types.h}
#     lib64/libascendcl.so libacl_dvpp.so libhccl.so  libruntime.so.N -> the project's installed libruntime
#     lib64/stub/   the link-time directory samples name (NPU_HOST_LIB): links to the libraries one level up
#     runtime/include -> ../include, runtime/lib64 -> ../lib64   (what CANN samples' CMakeLists.txt read)
#     acllib -> runtime                                          (the older samples' spelling of the same)
#     python/site-packages/acl/   the pyACL-compatible module (pure Python over libascendcl, python/acl/)
#     opp/                        empty: ASCEND_OPP_PATH points here; this runtime loads no operator packages
# RUNTIME_ACL_TOOLKIT_DIR (defined in the top-level CMakeLists.txt: tests/acl_samples uses it too), by default
# Ascend/ascend-toolkit, puts the toolkit where CANN's installer does relative to its prefix
# (/usr/local/Ascend/ascend-toolkit, $HOME/Ascend/ascend-toolkit), so a sample's default DDK_PATH matches.
# The libraries' RUNPATH is $ORIGIN (their neighbours in lib64/) and $ORIGIN/../runtime (the Python wheel's layout,
# python/CMakeLists.txt: site-packages/acl/ beside site-packages/runtime/). libruntime is linked, not copied, so a
# process that uses both the rt* API (P/lib) and the acl* API loads one runtime.
if(NOT TARGET ascendcl)
  return()  # the AscendCL libraries are not part of this build (src/acl absent)
endif()

set(_acl_root "${RUNTIME_ACL_TOOLKIT_DIR}")
set(_acl_home "${_acl_root}/${PROJECT_VERSION}")
set(_acl_libs ascendcl)
foreach(t acl_dvpp hccl)
  if(TARGET ${t})
    list(APPEND _acl_libs ${t})
  endif()
endforeach()

set_target_properties(${_acl_libs} PROPERTIES INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../runtime")
install(TARGETS ${_acl_libs} LIBRARY DESTINATION "${_acl_home}/lib64")
foreach(d acl hccl)
  if(EXISTS "${PROJECT_SOURCE_DIR}/include/${d}")
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/${d}" DESTINATION "${_acl_home}/include")
  endif()
endforeach()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/python/acl/" DESTINATION "${_acl_home}/python/site-packages/acl"
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY DESTINATION "${_acl_home}/opp")
install(PROGRAMS "${PROJECT_SOURCE_DIR}/cmake/acl_set_env.sh" DESTINATION "${_acl_root}" RENAME set_env.sh)

# The symbolic links. Each is relative, so the tree can be moved or packaged with DESTDIR as a whole.
set(_acl_links "")
macro(_acl_link target link)  # link (relative to the install prefix) -> target (relative to the link's folder)
  string(APPEND _acl_links "  _rt_acl_link(\"${target}\" \"${link}\")\n")
endmacro()
_acl_link("${PROJECT_VERSION}" "${_acl_root}/latest")
_acl_link("../include" "${_acl_home}/runtime/include")
_acl_link("../lib64" "${_acl_home}/runtime/lib64")
_acl_link("runtime" "${_acl_home}/acllib")
foreach(t IN LISTS _acl_libs)
  _acl_link("../$<TARGET_LINKER_FILE_NAME:${t}>" "${_acl_home}/lib64/stub/$<TARGET_LINKER_FILE_NAME:${t}>")
endforeach()
# libruntime under its SONAME (what the acl libraries' DT_NEEDED names): in lib64/ for the loader, in stub/ for the
# link editor, which resolves a stub library's own dependencies from its folder when an application links.
file(RELATIVE_PATH _acl_to_libdir "/p/${_acl_home}/lib64" "/p/${CMAKE_INSTALL_LIBDIR}")
_acl_link("${_acl_to_libdir}/$<TARGET_SONAME_FILE_NAME:runtime>" "${_acl_home}/lib64/$<TARGET_SONAME_FILE_NAME:runtime>")
_acl_link("../$<TARGET_SONAME_FILE_NAME:runtime>" "${_acl_home}/lib64/stub/$<TARGET_SONAME_FILE_NAME:runtime>")
install(CODE "
function(_rt_acl_link target link)
  set(path \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${link}\")
  get_filename_component(dir \"\${path}\" DIRECTORY)
  file(MAKE_DIRECTORY \"\${dir}\")
  if(IS_SYMLINK \"\${path}\" OR (EXISTS \"\${path}\" AND NOT IS_DIRECTORY \"\${path}\"))
    file(REMOVE \"\${path}\")
  elseif(IS_DIRECTORY \"\${path}\")
    message(FATAL_ERROR \"acl install: \${path} is a directory where the tree needs a link to \${target}\")
  endif()
  message(STATUS \"Installing: \${path} -> \${target}\")
  file(CREATE_LINK \"\${target}\" \"\${path}\" RESULT res SYMBOLIC)
  if(NOT res EQUAL 0)
    message(FATAL_ERROR \"acl install: cannot link \${path} -> \${target}: \${res}\")
  endif()
endfunction()
${_acl_links}")
