# Decides whether the CUDA parts are built (XCCL_WITH_CUDA). AUTO turns them on only when the
# installed torch is a CUDA build and a CUDA compiler of the same major version works, so a CPU
# torch or a machine without nvcc still builds everything else.
set(XCCL_WITH_CUDA 0)
if(NOT XCCL_GPU STREQUAL "OFF" AND XCCL_TORCH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    string(REGEX MATCH "^[0-9]+" _torch_cuda_major "${XCCL_TORCH_CUDA}")
    string(REGEX MATCH "^[0-9]+" _nvcc_major "${CMAKE_CUDA_COMPILER_VERSION}")
    if(_torch_cuda_major STREQUAL _nvcc_major)
      set(XCCL_WITH_CUDA 1)
      # Found here, at the top level, so CUDA::cudart is visible to every folder.
      find_package(CUDAToolkit REQUIRED)
    else()
      message(WARNING "torch is built for CUDA ${XCCL_TORCH_CUDA} but nvcc is "
                      "${CMAKE_CUDA_COMPILER_VERSION}: building without the CUDA parts")
    endif()
  endif()
endif()
if(XCCL_GPU STREQUAL "ON" AND NOT XCCL_WITH_CUDA)
  message(FATAL_ERROR "XCCL_GPU=ON but no usable CUDA compiler for this torch was found")
endif()
message(STATUS "xccl CUDA parts: ${XCCL_WITH_CUDA}")

# GPU architectures for the CUDA sources. setup.py passes what the installed torch was built for
# (torch.cuda.get_arch_list()); standalone builds default to A100 and H100/H200.
set(XCCL_CUDA_ARCHS "80;90" CACHE STRING "CUDA architectures of the device code (CMake list)")

