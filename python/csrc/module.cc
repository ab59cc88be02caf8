// The Python module braid_torch._C.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include "backend.h"
#include "braid_api.h"
#include "device_sync.h"
#include "worker.h"

namespace py = pybind11;

namespace {

// The braid backend of a process group's CPU backend, or an error naming `caller`.
braid_torch::BraidBackend& braidBackendOf(const c10::intrusive_ptr<c10d::Backend>& backend, const char* caller) {
  auto* braidBackend = dynamic_cast<braid_torch::BraidBackend*>(backend.get());
  TORCH_CHECK(braidBackend != nullptr, "braid_torch.", caller, ": the group's CPU backend is ",
              backend->getBackendName(), ", not braid");
  return *braidBackend;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "braid as a torch.distributed backend (see braid_torch)";
  m.def("load_library", &braid_torch::loadBraid, py::arg("path"),
        "Opens libbraid (once per process) and returns its version string.");
  m.def("library_path", &braid_torch::loadedBraidPath);
  m.def("built_with_cuda", &braid_torch::builtWithCuda);
  m.def("device_buffers_supported", &braid_torch::deviceBuffersSupported);
  m.def("optional_symbols", &braid_torch::optionalSymbols,
        "braid's optional extensions by name, and whether the loaded library exports each.");
  m.def("wait_all_idle", &braid_torch::Worker::waitAllIdle, py::arg("seconds"),
        py::call_guard<py::gil_scoped_release>(),
        "Waits until no braid group has an operation queued or running; True when idle.");
  m.def(
      "set_reproducible",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, bool on) {
        braidBackendOf(backend, "set_reproducible").setReproducible(on);
      },
      py::arg("backend"), py::arg("on"), py::call_guard<py::gil_scoped_release>(),
      "Reproducible reductions on one braid process group's communicator.");
  m.def(
      "set_wire_type",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, int wire) {
        braidBackendOf(backend, "set_wire_type").setWireType(static_cast<ncclDataType_t>(wire));
      },
      py::arg("backend"), py::arg("wire"), py::call_guard<py::gil_scoped_release>(),
      "The wire type of one braid process group's float32 sums (an ncclDataType_t).");
  m.def(
      "wire_round_trip",
      [](const at::Tensor& values, int wire) {
        TORCH_CHECK(braid_torch::braid().wireRoundTrip != nullptr,
                    "braid: the loaded libbraid has no wire types (braidWireRoundTrip); update it");
        TORCH_CHECK(values.device().is_cpu() && values.scalar_type() == at::kFloat,
                    "braid_torch.wire_round_trip: a float32 CPU tensor, not ", values.toString());
        at::Tensor in = values.contiguous();
        at::Tensor out = at::empty_like(in);
        const ncclResult_t r = braid_torch::braid().wireRoundTrip(in.data_ptr<float>(), out.data_ptr<float>(),
                                                                  size_t(in.numel()), static_cast<ncclDataType_t>(wire));
        TORCH_CHECK(r == ncclSuccess, "braidWireRoundTrip failed (", int(r), ")");
        return out;
      },
      py::arg("values"), py::arg("wire"), py::call_guard<py::gil_scoped_release>(),
      "What a peer decodes from `values` sent as one message of the wire type.");
  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout) {
        return braid_torch::createBraidBackend(store, rank, size, timeout);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>(),
      "Creates the backend for one process group (collective over its ranks).");
}
