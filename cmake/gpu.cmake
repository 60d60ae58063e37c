# Decides whether the CUDA parts are built (XCCL_WITH_CUDA). AUTO turns them on only when the
# installed torch is a CUDA build and a CUDA compiler of the same major version works, so a CPU
# torch or a machine without nvcc still builds everything else. ON (CI) turns every reason for
# not building them into a configure error.

# GPU architectures of the device code. setup.py passes the list it derives from the installed
# torch (cuda_archs() there says which and why); standalone builds default to machine code for A100
# and H100/H200 plus compute_90 PTX. The kernels need sm_70+ (ld.acquire.sys, st.release.sys).
set(XCCL_CUDA_ARCHS "80-real;90" CACHE STRING "CUDA architectures of the device code (CMake list)")
# Before enable_language(CUDA): its compiler check then builds for these architectures too, so an
# nvcc that cannot target them fails here rather than halfway through the build.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "${XCCL_CUDA_ARCHS}")
endif()

if(NOT XCCL_GPU MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "XCCL_GPU must be AUTO, ON or OFF, not '${XCCL_GPU}'")
endif()
set(XCCL_WITH_CUDA 0)
set(_xccl_no_cuda_reason "")
if(XCCL_GPU STREQUAL "OFF")
  set(_xccl_no_cuda_reason "XCCL_GPU=OFF")
elseif(NOT XCCL_TORCH_CUDA)
  set(_xccl_no_cuda_reason "torch is not a CUDA build (XCCL_TORCH_CUDA is empty)")
else()
  # CUDACXX or -DCMAKE_CUDA_COMPILER when given, else nvcc on PATH. Its version is checked before
  # enable_language(CUDA), which would fail hard on an nvcc too old for CMAKE_CUDA_ARCHITECTURES.
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(_xccl_no_cuda_reason "no CUDA compiler found (set CUDACXX or put nvcc on PATH)")
  else()
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _nvcc_version
                    ERROR_QUIET)
    string(REGEX MATCH "^[0-9]+" _torch_cuda_major "${XCCL_TORCH_CUDA}")
    if(NOT _nvcc_version MATCHES "Cuda compilation tools, release ([0-9]+)\\.([0-9]+)")
      set(_xccl_no_cuda_reason "${CMAKE_CUDA_COMPILER} is not nvcc")
    elseif(NOT CMAKE_MATCH_1 STREQUAL _torch_cuda_major)
      string(CONCAT _xccl_no_cuda_reason "torch is built for CUDA ${XCCL_TORCH_CUDA} but "
                    "${CMAKE_CUDA_COMPILER} is nvcc ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    else()
      enable_language(CUDA)
      set(XCCL_WITH_CUDA 1)
      # Found here, at the top level, so CUDA::cudart is visible to every folder.
      find_package(CUDAToolkit REQUIRED)
    endif()
  endif()
endif()
if(XCCL_WITH_CUDA)
  message(STATUS "xccl CUDA parts: 1 (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${XCCL_CUDA_ARCHS})")
elseif(XCCL_GPU STREQUAL "ON")
  message(FATAL_ERROR "XCCL_GPU=ON but the CUDA parts cannot be built: ${_xccl_no_cuda_reason}")
elseif(CMAKE_CUDA_COMPILER)
  # A compiler is there but is the wrong one: worth a warning, unlike having none.
  message(WARNING "building without the CUDA parts: ${_xccl_no_cuda_reason}")
else()
  message(STATUS "xccl CUDA parts: 0 (${_xccl_no_cuda_reason})")
endif()
