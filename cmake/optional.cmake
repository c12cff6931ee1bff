# SPDX-License-Identifier: Apache-2.0
#
# ring_optional(NAME VAR): detects one optional dependency and sets RING_HAVE_<NAME> to
# ON or OFF. VAR holds AUTO, ON or OFF; ON fails the configure when it is not found, so
# that a build that was asked for a feature never silently lacks it.

function(ring__probe name out)
  set(found OFF)
  if(name STREQUAL "MPI")
    find_package(MPI COMPONENTS C QUIET)
    if(MPI_C_FOUND)
      set(found ON)
    endif()
  elseif(name STREQUAL "CUDA")
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      find_library(RING_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{CUDA_HOME}/lib64)
      find_path(RING_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include)
      if(RING_NCCL_LIBRARY AND RING_NCCL_INCLUDE)
        set(found ON)
      endif()
    endif()
  elseif(name STREQUAL "SLURM")
    # Debian's libslurm-dev ships no .pc file; the library and header are enough. The
    # target ring::slurm carries both.
    find_library(RING_SLURM_LIBRARY slurm)
    find_path(RING_SLURM_INCLUDE slurm/slurm.h)
    if(RING_SLURM_LIBRARY AND RING_SLURM_INCLUDE)
      set(found ON)
      if(NOT TARGET ring::slurm)
        add_library(ring::slurm INTERFACE IMPORTED GLOBAL)
        set_target_properties(ring::slurm PROPERTIES
          INTERFACE_INCLUDE_DIRECTORIES "${RING_SLURM_INCLUDE}"
          INTERFACE_LINK_LIBRARIES "${RING_SLURM_LIBRARY}")
      endif()
    endif()
  elseif(name STREQUAL "PMIX")
    pkg_check_modules(RING_PMIX QUIET IMPORTED_TARGET GLOBAL pmix)
    if(RING_PMIX_FOUND)
      set(found ON)
    endif()
  endif()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

macro(ring_optional name var)
  string(TOUPPER "${${var}}" _mode)
  if(NOT _mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var} must be AUTO, ON or OFF, not '${${var}}'")
  endif()
  set(RING_HAVE_${name} OFF)
  if(NOT _mode STREQUAL "OFF")
    ring__probe(${name} _found)
    if(_found)
      set(RING_HAVE_${name} ON)
    elseif(_mode STREQUAL "ON")
      message(FATAL_ERROR "${var}=ON but ${name} was not found; install it "
                          "(see contrib/deps.sh) or set ${var}=AUTO")
    endif()
  endif()
endmacro()
