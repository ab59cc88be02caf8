// braidSupportsDeviceBuffers (include/braid.h): frameworks ask it before they
// hand braid device memory.
#include "braid.h"

#include "api/api_util.h"
#include "runtime/device/device.h"

extern "C" BRAID_EXPORT int braidSupportsDeviceBuffers(void) {
  return braid::deviceBuffersSupported() ? 1 : 0;
}
