# The library's layers. Each layer is an OBJECT library built from the .cc
# files of its folders, and it sees only its own folders and those of the
# layers it depends on (transitively): an #include that points up or sideways
# finds no file and fails to build. The folders are reached through one include
# root per layer, ${PROJECT_BINARY_DIR}/layers/<layer>/, holding a link per
# folder (base -> src/base, transports -> transports, ...), so every include
# reads "<folder>/<file>.h" whatever layer includes it.
#
#   braid_declare_layer(<name> DIRS <folder>... [DEPENDS <layer>...])
#       declares a layer; BRAID_LAYER_INCLUDES_<name> is its include path
#   braid_add_layer_targets()
#       makes braid_<name> for each declared layer, leaving out the sources
#       that match a regex of BRAID_EXCLUDED_SOURCES (CUDA-only, hwloc-only)
#
# tests/layers checks the same declaration against the include graph.

set(BRAID_LAYERS "")
set(BRAID_EXCLUDED_SOURCES "")
set(BRAID_LAYER_MANIFEST "${PROJECT_BINARY_DIR}/layers/manifest.txt")
file(REMOVE_RECURSE "${PROJECT_BINARY_DIR}/layers")
file(MAKE_DIRECTORY "${PROJECT_BINARY_DIR}/layers")

function(braid_declare_layer name)
  cmake_parse_arguments(L "" "" "DIRS;DEPENDS" ${ARGN})
  set(view "${PROJECT_BINARY_DIR}/layers/${name}")
  file(MAKE_DIRECTORY "${view}")
  foreach(dir IN LISTS L_DIRS)
    get_filename_component(leaf "${dir}" NAME)
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${dir}" "${view}/${leaf}" SYMBOLIC)
  endforeach()
  set(includes "${view}")
  foreach(dep IN LISTS L_DEPENDS)
    if(NOT DEFINED BRAID_LAYER_INCLUDES_${dep})
      message(FATAL_ERROR "layer ${name} depends on ${dep}, which is not declared before it")
    endif()
    list(APPEND includes ${BRAID_LAYER_INCLUDES_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES includes)
  set(BRAID_LAYER_INCLUDES_${name} "${PROJECT_SOURCE_DIR}/include;${includes}" PARENT_SCOPE)
  set(BRAID_LAYER_DIRS_${name} "${L_DIRS}" PARENT_SCOPE)
  set(BRAID_LAYERS ${BRAID_LAYERS} ${name} PARENT_SCOPE)
  file(APPEND "${BRAID_LAYER_MANIFEST}" "${name}|${L_DIRS}|${L_DEPENDS}\n")
endfunction()

function(braid_add_layer_targets)
  set(objects "")
  foreach(name IN LISTS BRAID_LAYERS)
    set(sources "")
    foreach(dir IN LISTS BRAID_LAYER_DIRS_${name})
      file(GLOB_RECURSE found CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${dir}/*.cc")
      list(APPEND sources ${found})
    endforeach()
    foreach(regex IN LISTS BRAID_EXCLUDED_SOURCES)
      list(FILTER sources EXCLUDE REGEX "${regex}")
    endforeach()
    add_library(braid_${name} OBJECT ${sources})
    target_include_directories(braid_${name} PRIVATE ${BRAID_LAYER_INCLUDES_${name}})
    target_compile_options(braid_${name} PRIVATE -fvisibility=hidden -O3)
    target_compile_definitions(braid_${name} PRIVATE BRAID_VERSION="${PROJECT_VERSION}")
    target_link_libraries(braid_${name} PRIVATE Threads::Threads braid_hwloc)
    if(BRAID_CUDA)
      target_compile_definitions(braid_${name} PRIVATE BRAID_HAVE_CUDA=1)
      target_link_libraries(braid_${name} PRIVATE CUDA::cudart_static)
    endif()
    list(APPEND objects "$<TARGET_OBJECTS:braid_${name}>")
  endforeach()
  set(BRAID_LAYER_OBJECTS "${objects}" PARENT_SCOPE)
endfunction()
