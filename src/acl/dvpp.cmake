# dvpp.cmake — libacl_dvpp: the acldvpp V1 face (include/acl/ops/acl_dvpp.h) over the runtime's DVPP
# (src/acl/dvpp*.cpp). Included by src/acl/CMakeLists.txt; shares acl_common.hpp, whose symbols libascendcl exports.
file(GLOB ACL_DVPP_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/dvpp*.cpp)
add_library(acl_dvpp SHARED ${ACL_DVPP_SOURCES})
target_include_directories(acl_dvpp
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
# FUNC_VISIBILITY: ACL_FUNC_VISIBILITY exports the acldvpp* functions; everything else stays hidden.
target_compile_definitions(acl_dvpp PRIVATE FUNC_VISIBILITY)
target_compile_options(acl_dvpp PRIVATE -Wall -Wextra)
set_target_properties(acl_dvpp PROPERTIES OUTPUT_NAME acl_dvpp CXX_VISIBILITY_PRESET hidden
                      VISIBILITY_INLINES_HIDDEN ON)
target_link_libraries(acl_dvpp PRIVATE ascendcl runtime)
