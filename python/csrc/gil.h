// The one place the backend's C++ touches Python's interpreter lock.
#pragma once

#include <functional>

namespace braid_torch {

// Runs fn with the GIL released when the calling thread holds it. A worker
// thread may need the GIL to free tensors that Python handed over (dropping a
// tensor whose Python object C++ keeps alive takes the GIL), so no thread may
// hold the GIL while it waits for a worker.
void withoutGil(const std::function<void()>& fn);

}  // namespace braid_torch
