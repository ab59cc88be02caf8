/* A stand-in libhwloc that has every entry point braid resolves but says it is
 * hwloc API 3.0: the loader must refuse it (another major is another ABI)
 * without calling anything else. */
#define STUB(name) \
  int name(void) { return -1; }

unsigned hwloc_get_api_version(void) { return 0x00030000; }
STUB(hwloc_topology_init)
STUB(hwloc_topology_destroy)
STUB(hwloc_topology_load)
STUB(hwloc_topology_set_flags)
STUB(hwloc_topology_set_xmlbuffer)
STUB(hwloc_topology_set_io_types_filter)
STUB(hwloc_get_type_depth)
STUB(hwloc_get_obj_by_depth)
STUB(hwloc_distances_get_by_depth)
STUB(hwloc_distances_release)
STUB(hwloc_bitmap_first)
STUB(hwloc_bitmap_next)
STUB(hwloc_bitmap_weight)
