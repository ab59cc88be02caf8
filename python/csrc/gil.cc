#include "gil.h"

#include <Python.h>
#include <pybind11/pybind11.h>

namespace braid_torch {

void withoutGil(const std::function<void()>& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    fn();
    return;
  }
  fn();
}

}  // namespace braid_torch
