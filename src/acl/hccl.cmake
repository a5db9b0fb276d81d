# hccl.cmake — libhccl: the HCCL face (include/hccl/hccl.h) over the runtime's collectives (src/acl/hccl*.cpp).
# Included by src/acl/CMakeLists.txt; shares acl_common.hpp, whose symbols libascendcl exports.
file(GLOB HCCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/hccl*.cpp)
add_library(hccl SHARED ${HCCL_SOURCES})
target_include_directories(hccl
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
# FUNC_VISIBILITY: ACL_FUNC_VISIBILITY exports the Hccl* functions; everything else stays hidden.
target_compile_definitions(hccl PRIVATE FUNC_VISIBILITY)
target_compile_options(hccl PRIVATE -Wall -Wextra)
set_target_properties(hccl PROPERTIES OUTPUT_NAME hccl CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
target_link_libraries(hccl PRIVATE ascendcl runtime)
