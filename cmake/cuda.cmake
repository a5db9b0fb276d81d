# cuda.cmake — RUNTIME_WITH_CUDA (AUTO|ON|OFF): finds the CUDA headers (cuda.h, nvrtc.h) for the cuda backend.
#
# The backend needs headers only: libcuda and libnvrtc are opened with dlopen at run time, so libruntime has
# no link-time dependency on any CUDA library (tests/cuda/check_no_cuda_needed.cmake checks DT_NEEDED).
# Sets RUNTIME_CUDA_ENABLED (bool) and RUNTIME_CUDA_INCLUDE_DIR.
set(RUNTIME_WITH_CUDA AUTO CACHE STRING "Build the cuda backend: AUTO (when the CUDA headers are found), ON (required), OFF")
set_property(CACHE RUNTIME_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${RUNTIME_WITH_CUDA}" _rt_cuda_mode)
if(NOT _rt_cuda_mode MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "RUNTIME_WITH_CUDA must be AUTO, ON or OFF, not '${RUNTIME_WITH_CUDA}'")
endif()

set(RUNTIME_CUDA_ENABLED OFF)
if(NOT _rt_cuda_mode MATCHES "^(OFF|FALSE|NO|0)$")
  # Headers only: the toolkit's include directory (CUDAToolkit when CMake finds it, else the usual places).
  find_package(CUDAToolkit QUIET)
  find_path(RUNTIME_CUDA_INCLUDE_DIR NAMES cuda.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDA_PATH ENV CUDA_HOME
    PATHS /usr/local/cuda/include /opt/cuda/include /usr/include
    PATH_SUFFIXES include)
  if(RUNTIME_CUDA_INCLUDE_DIR AND EXISTS "${RUNTIME_CUDA_INCLUDE_DIR}/nvrtc.h")
    set(RUNTIME_CUDA_ENABLED ON)
    message(STATUS "runtime: cuda backend ON (headers: ${RUNTIME_CUDA_INCLUDE_DIR}; libcuda/libnvrtc are loaded at run time)")
  elseif(_rt_cuda_mode MATCHES "^(ON|TRUE|YES|1)$")
    message(FATAL_ERROR "RUNTIME_WITH_CUDA=ON but cuda.h and nvrtc.h were not found (install the CUDA toolkit, or "
                        "pass -DRUNTIME_CUDA_INCLUDE_DIR=<toolkit>/include)")
  else()
    message(STATUS "runtime: cuda backend OFF (no CUDA headers found; RUNTIME_WITH_CUDA=AUTO)")
  endif()
else()
  message(STATUS "runtime: cuda backend OFF (RUNTIME_WITH_CUDA=OFF)")
endif()
