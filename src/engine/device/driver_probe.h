// Whether the CUDA driver (libcuda.so.1) is loaded in this process. No device
// buffer can exist before it is, so until then braid makes no CUDA call at all
// (which also keeps host-only programs free to fork). Checked cheaply: the
// library list is looked at again only after it changed.
#pragma once

namespace braid::device {

bool cudaDriverLoaded();

}  // namespace braid::device
