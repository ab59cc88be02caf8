# Optional CUDA support. Included from the top-level CMakeLists.txt; everything
# CUDA lives in separate targets (braid_kernels, tests/gpu), so the host-only
# library builds and links exactly the same with or without a CUDA compiler.
#
#   BRAID_CUDA        build the device code (default: ON when nvcc is found)
#   BRAID_CUDA_ARCHS  SM versions to build, e.g. "90" or "80;90": real code for
#                     each, plus PTX for the newest so later GPUs can JIT it

include(CheckLanguage)

# The top level's warning flags are g++ spellings that nvcc rejects: in the
# calling directory, keep them for C/C++ and hand them to nvcc's host compiler
# for CUDA sources.
function(braid_pass_host_flags_to_nvcc)
  get_property(host_opts DIRECTORY PROPERTY COMPILE_OPTIONS)
  set(dir_opts "")
  foreach(opt IN LISTS host_opts)
    list(APPEND dir_opts "$<$<COMPILE_LANGUAGE:C,CXX>:${opt}>" "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>")
  endforeach()
  set_property(DIRECTORY PROPERTY COMPILE_OPTIONS "${dir_opts}")
endfunction()

# CI images put the toolkit under /usr/local/cuda without adding it to PATH.
# check_language() honours CUDACXX in its probe project, so point it there
# rather than setting CMAKE_CUDA_COMPILER, which would skip the probe.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(BRAID_NVCC_ON_PATH nvcc)
  mark_as_advanced(BRAID_NVCC_ON_PATH)
  if(NOT BRAID_NVCC_ON_PATH AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
endif()
check_language(CUDA)

if(CMAKE_CUDA_COMPILER)
  set(BRAID_CUDA_DEFAULT ON)
else()
  set(BRAID_CUDA_DEFAULT OFF)
endif()
option(BRAID_CUDA "Build the CUDA kernels and GPU tests (needs nvcc)" ${BRAID_CUDA_DEFAULT})
set(BRAID_CUDA_ARCHS "90" CACHE STRING "SM versions to build device code for (PTX for the last)")

if(NOT BRAID_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(STATUS "braid: no CUDA compiler found, building the host-only library")
  else()
    message(STATUS "braid: BRAID_CUDA=OFF, building the host-only library")
  endif()
  return()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "BRAID_CUDA=ON but no CUDA compiler was found (set CUDACXX or put nvcc on PATH)")
endif()

# "90" -> "90-real;90-virtual": SASS for every listed SM, PTX only for the
# newest (PTX for each would double device compile time for no gain).
set(BRAID_CUDA_ARCHITECTURES "")
foreach(arch IN LISTS BRAID_CUDA_ARCHS)
  list(APPEND BRAID_CUDA_ARCHITECTURES "${arch}-real")
endforeach()
list(GET BRAID_CUDA_ARCHS -1 BRAID_CUDA_PTX_ARCH)
list(APPEND BRAID_CUDA_ARCHITECTURES "${BRAID_CUDA_PTX_ARCH}-virtual")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "${BRAID_CUDA_ARCHITECTURES}")
endif()

enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit REQUIRED)
message(STATUS "braid: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, device code for ${BRAID_CUDA_ARCHITECTURES}")

add_subdirectory(${PROJECT_SOURCE_DIR}/kernels ${PROJECT_BINARY_DIR}/kernels)
