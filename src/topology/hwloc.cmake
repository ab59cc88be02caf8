# Optional hwloc topology discovery. Included from the top-level CMakeLists.txt
# between the source glob and the library targets: it drops
# src/topology/hwloc_*.cc from BRAID_SOURCES unless hwloc is used, and defines
# the interface target braid_hwloc (empty without hwloc) that the library
# targets link. braid_hwloc gives hwloc's headers and BRAID_HAVE_HWLOC only:
# libhwloc is not linked but loaded at run time (hwloc_loader.h), so the same
# libbraid runs on machines without hwloc (and reads sysfs there).
#
#   BRAID_HWLOC  AUTO (default): use hwloc when pkg-config finds it;
#                ON: hwloc is required; OFF: sysfs only

set(BRAID_HWLOC AUTO CACHE STRING "Topology discovery with hwloc: AUTO, ON or OFF")
set_property(CACHE BRAID_HWLOC PROPERTY STRINGS AUTO ON OFF)

string(TOUPPER "${BRAID_HWLOC}" _braid_hwloc)
set(BRAID_HWLOC_USED OFF)
if(_braid_hwloc STREQUAL "AUTO" OR _braid_hwloc)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  endif()
  if(HWLOC_FOUND)
    set(BRAID_HWLOC_USED ON)
  elseif(NOT _braid_hwloc STREQUAL "AUTO")
    message(FATAL_ERROR "BRAID_HWLOC=ON but pkg-config finds no hwloc >= 2.0 (install libhwloc-dev)")
  endif()
endif()

add_library(braid_hwloc INTERFACE)
if(BRAID_HWLOC_USED)
  message(STATUS "braid: topology discovery with hwloc ${HWLOC_VERSION} (sysfs as fallback)")
  target_compile_definitions(braid_hwloc INTERFACE BRAID_HAVE_HWLOC=1)
  # Headers and flags only, not PkgConfig::HWLOC (that would link libhwloc).
  target_include_directories(braid_hwloc INTERFACE ${HWLOC_INCLUDE_DIRS})
  target_compile_options(braid_hwloc INTERFACE ${HWLOC_CFLAGS_OTHER})
else()
  message(STATUS "braid: topology discovery from sysfs only (no hwloc)")
  list(APPEND BRAID_EXCLUDED_SOURCES "/src/topology/hwloc_[^/]*\\.cc$")
endif()
