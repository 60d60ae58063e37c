# Decides whether the GPU parts are built (XCCL_WITH_CUDA; the name predates ROCm and means "CUDA
# or HIP") and in which language (XCCL_GPU_LANGUAGE: CUDA or HIP), from the installed torch:
# XCCL_TORCH_CUDA (torch.version.cuda) picks nvcc, XCCL_TORCH_HIP (torch.version.hip) picks HIP.
# AUTO turns them on only when a compiler of torch's major version works, so a CPU torch or a
# machine without the compiler still builds everything else. ON (CI) turns every reason for not
# building them into a configure error. The same sources build either way (common/gpu_runtime.h).

# GPU architectures of the device code. setup.py passes the list it derives from the installed
# torch (cuda_archs() there says which and why); standalone builds default to machine code for A100
# and H100/H200 plus compute_90 PTX. The kernels need sm_70+ (ld.acquire.sys, st.release.sys).
set(XCCL_CUDA_ARCHS "80-real;90" CACHE STRING "CUDA architectures of the device code (CMake list)")
# AMD targets: MI200 (gfx90a) and MI300 (gfx942), the CDNA GPUs with xGMI that the kernels target.
# Each is a full device compile; setup.py passes XCCL_HIP_ARCHS from the environment when set.
set(XCCL_HIP_ARCHS "gfx90a;gfx942" CACHE STRING "HIP offload architectures of the device code")
set(XCCL_TORCH_HIP "" CACHE STRING "torch.version.hip of that torch; empty unless a ROCm build")
# torch.utils.hipify.__version__ >= 2: a ROCm torch's headers keep the c10::cuda names (see
# backend/gpu/gpu_stream.h). Only read for a ROCm torch.
set(XCCL_TORCH_HIPIFY_V2 0 CACHE BOOL "The ROCm torch was hipified with hipify v2")

if(NOT XCCL_GPU MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "XCCL_GPU must be AUTO, ON or OFF, not '${XCCL_GPU}'")
endif()
set(XCCL_WITH_CUDA 0)
set(XCCL_GPU_LANGUAGE "")
set(_xccl_no_gpu_reason "")
include(CheckLanguage)

# CMAKE_<lang>_ARCHITECTURES = `archs` unless given, then looks for the compiler; without one,
# _xccl_no_gpu_reason says so with `hint`. The architectures are set before enable_language():
# its compiler check then builds for them too, so a compiler that cannot target them fails here
# rather than halfway through the build.
macro(_xccl_find_compiler lang archs hint)
  if(NOT DEFINED CMAKE_${lang}_ARCHITECTURES)
    set(CMAKE_${lang}_ARCHITECTURES "${archs}")
  endif()
  check_language(${lang})
  if(NOT CMAKE_${lang}_COMPILER)
    set(_xccl_no_gpu_reason "no ${lang} compiler found (${hint})")
  endif()
endmacro()

# CUDA: CUDACXX or -DCMAKE_CUDA_COMPILER when given, else nvcc on PATH. Its version is checked
# before enable_language(CUDA), which would fail hard on an nvcc too old for the architectures.
macro(_xccl_try_cuda)
  _xccl_find_compiler(CUDA "${XCCL_CUDA_ARCHS}" "set CUDACXX or put nvcc on PATH")
  if(CMAKE_CUDA_COMPILER)
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _nvcc_version
                    ERROR_QUIET)
    string(REGEX MATCH "^[0-9]+" _torch_cuda_major "${XCCL_TORCH_CUDA}")
    if(NOT _nvcc_version MATCHES "Cuda compilation tools, release ([0-9]+)\\.([0-9]+)")
      set(_xccl_no_gpu_reason "${CMAKE_CUDA_COMPILER} is not nvcc")
    elseif(NOT CMAKE_MATCH_1 STREQUAL _torch_cuda_major)
      string(CONCAT _xccl_no_gpu_reason "torch is built for CUDA ${XCCL_TORCH_CUDA} but "
                    "${CMAKE_CUDA_COMPILER} is nvcc ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    else()
      enable_language(CUDA)
      set(XCCL_WITH_CUDA 1)
      set(XCCL_GPU_LANGUAGE CUDA)
      # Found here, at the top level, so CUDA::cudart is visible to every folder.
      find_package(CUDAToolkit REQUIRED)
    endif()
  endif()
endmacro()

# HIP (CMake >= 3.21): HIPCXX or -DCMAKE_HIP_COMPILER when given (ROCm's clang++, not hipcc),
# else one CMake finds in the ROCm installation. HIP's runtime must have torch's major version:
# a ROCm torch loads its own libamdhip64 and an extension built against another major may not run.
macro(_xccl_try_hip)
  if(CMAKE_VERSION VERSION_LESS 3.21)
    set(_xccl_no_gpu_reason "the HIP language needs CMake 3.21, this is ${CMAKE_VERSION}")
  else()
    _xccl_find_compiler(HIP "${XCCL_HIP_ARCHS}" "set HIPCXX to ROCm's clang++")
    if(CMAKE_HIP_COMPILER)
      # hip::host and HIP's version; ROCm installs it under its root, /opt/rocm by default.
      find_package(hip CONFIG QUIET HINTS $ENV{ROCM_PATH} /opt/rocm)
      string(REGEX MATCH "^[0-9]+" _torch_hip_major "${XCCL_TORCH_HIP}")
      if(NOT hip_FOUND)
        set(_xccl_no_gpu_reason "HIP's CMake package (hip-config.cmake) not found; set ROCM_PATH")
      elseif(NOT hip_VERSION_MAJOR STREQUAL _torch_hip_major)
        string(CONCAT _xccl_no_gpu_reason "torch is built for ROCm ${XCCL_TORCH_HIP} but the "
                      "HIP found is ${hip_VERSION}")
      else()
        enable_language(HIP)
        set(XCCL_WITH_CUDA 1)
        set(XCCL_GPU_LANGUAGE HIP)
      endif()
    endif()
  endif()
endmacro()

if(XCCL_GPU STREQUAL "OFF")
  set(_xccl_no_gpu_reason "XCCL_GPU=OFF")
elseif(XCCL_TORCH_CUDA AND XCCL_TORCH_HIP)
  set(_xccl_no_gpu_reason "XCCL_TORCH_CUDA and XCCL_TORCH_HIP are both set; torch is one or other")
elseif(XCCL_TORCH_CUDA)
  _xccl_try_cuda()
elseif(XCCL_TORCH_HIP)
  _xccl_try_hip()
else()
  string(CONCAT _xccl_no_gpu_reason "torch is neither a CUDA nor a ROCm build (XCCL_TORCH_CUDA "
                "and XCCL_TORCH_HIP are empty)")
endif()

if(XCCL_GPU_LANGUAGE STREQUAL "CUDA")
  message(STATUS "xccl GPU parts: CUDA (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${XCCL_CUDA_ARCHS})")
elseif(XCCL_GPU_LANGUAGE STREQUAL "HIP")
  message(STATUS "xccl GPU parts: HIP (HIP ${hip_VERSION}, ${CMAKE_HIP_COMPILER}, architectures "
                 "${CMAKE_HIP_ARCHITECTURES}, hipify v2: ${XCCL_TORCH_HIPIFY_V2})")
elseif(XCCL_GPU STREQUAL "ON")
  message(FATAL_ERROR "XCCL_GPU=ON but the GPU parts cannot be built: ${_xccl_no_gpu_reason}")
elseif(CMAKE_CUDA_COMPILER OR CMAKE_HIP_COMPILER)
  # A compiler is there but is the wrong one: worth a warning, unlike having none.
  message(WARNING "building without the GPU parts: ${_xccl_no_gpu_reason}")
else()
  message(STATUS "xccl GPU parts: none (${_xccl_no_gpu_reason})")
endif()
