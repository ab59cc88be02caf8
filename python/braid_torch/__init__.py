"""braid as a torch.distributed backend.

    import braid_torch                      # registers backend "braid"
    torch.distributed.init_process_group("braid", ...)

The backend serves CPU tensors through libbraid's host path (and CUDA tensors
when built with BRAID_TORCH_CUDA=1). libbraid is found through, in order:
the BRAID_LIBRARY environment variable, the path recorded when this package
was built, and the loader's search for libbraid.so.0 (LD_LIBRARY_PATH, the
ldconfig cache).
"""

import atexit
import os
import sys

import torch
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND_NAME", "braid_version", "library_path", "built_with_cuda", "device_buffers_supported"]

BACKEND_NAME = "braid"


def _library_candidates():
    env = os.environ.get("BRAID_LIBRARY")
    if env:
        return [env]
    found = []
    try:
        from ._build_config import BRAID_LIBRARY as recorded
        if recorded and os.path.exists(recorded):
            found.append(recorded)
    except ImportError:
        pass
    found.append("libbraid.so.0")
    return found


def _load():
    errors = []
    for path in _library_candidates():
        try:
            return _C.load_library(path)
        except RuntimeError as e:
            errors.append(str(e))
    raise ImportError("braid_torch: no usable libbraid:\n  " + "\n  ".join(errors))


_VERSION = _load()


def braid_version():
    """The version string of the libbraid this process loaded."""
    return _VERSION


def library_path():
    """The path libbraid was loaded from (as given to dlopen)."""
    return _C.library_path()


def built_with_cuda():
    """Whether this build of the extension accepts CUDA tensors."""
    return _C.built_with_cuda()


def device_buffers_supported():
    """Whether the loaded libbraid runs collectives on CUDA memory (CUDA tensors
    are refused otherwise; BRAID_TORCH_ALLOW_CUDA=1 overrides)."""
    return _C.device_buffers_supported()


def set_reproducible(group=None, on=True):
    """Reproducible reductions on a braid process group (the default group when
    None): float32/float64/float16/bfloat16 sum and avg results whose bits do not
    depend on the algorithm, channels, transport or rank order
    (braidCommSetReproducible; BRAID_REPRODUCIBLE=1 sets it for every group).
    Every rank of the group calls it, before the operations it should cover.
    CPU tensors, one operation at a time (not inside coalescing)."""
    pg = group if group is not None else dist.group.WORLD
    _C.set_reproducible(pg._get_backend(torch.device("cpu")), bool(on))


# Wire types by name: the ncclDataType_t values of nccl.h.
_WIRE_TYPES = {None: 7, "none": 7, "fp32": 7, "bf16": 9, "fp16": 6, "fp8e4m3": 10, "fp8e5m2": 11}


def _wire_code(wire):
    if isinstance(wire, torch.dtype):
        wire = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
                getattr(torch, "float8_e4m3fn", None): "fp8e4m3",
                getattr(torch, "float8_e5m2", None): "fp8e5m2"}.get(wire, str(wire))
    if wire not in _WIRE_TYPES:
        raise ValueError(f"braid_torch: wire type {wire!r}: expected bf16, fp16, fp8e4m3, fp8e5m2 or None")
    return _WIRE_TYPES[wire]


def set_wire_type(group=None, wire="bf16"):
    """Float32 sums and averages of a braid process group (the default group when
    None) travel as `wire`: "bf16", "fp16", "fp8e4m3", "fp8e5m2" (or the torch
    dtype), None for float32 (braidCommSetWireType; BRAID_WIRE_TYPE sets it for
    every group). Every hop accumulates in float32 and every rank of an
    all_reduce gets the same bits; lossy (docs/algorithms.md). Every rank of the
    group calls it, before the operations it should cover."""
    pg = group if group is not None else dist.group.WORLD
    _C.set_wire_type(pg._get_backend(torch.device("cpu")), _wire_code(wire))


def wire_round_trip(tensor, wire):
    """What a peer decodes when the float32 CPU `tensor` travels as one message of
    `wire` (braidWireRoundTrip): the narrowing a rank's contribution meets."""
    return _C.wire_round_trip(tensor, _wire_code(wire))


class ErrorFeedbackState:
    """State of error_feedback_hook: the group, its wire type, and each gradient
    bucket's residual (what the wire dropped from it last step)."""

    def __init__(self, process_group=None, wire="bf16"):
        self.process_group = process_group
        self.wire = wire
        self.residuals = {}


def error_feedback_hook(state, bucket):
    """A DistributedDataParallel communication hook for a group whose wire type is
    set (set_wire_type): each bucket's gradient gets last step's residual added
    before it is averaged, and keeps what its own narrowing drops for the next
    step, so that the wire's rounding errors do not accumulate in the weights.
    model.register_comm_hook(ErrorFeedbackState(group, "bf16"), error_feedback_hook)."""
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    grad = bucket.buffer()
    grad.div_(dist.get_world_size(group))
    key = bucket.index()
    residual = state.residuals.get(key)
    if residual is not None and residual.shape == grad.shape:
        grad.add_(residual)
    state.residuals[key] = grad - wire_round_trip(grad, state.wire)
    fut = dist.all_reduce(grad, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def _create_backend(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


def _drain_at_exit():
    # Operations still running when the interpreter finalizes could not free
    # the tensors they hold (that takes the GIL) and would abort the process.
    wait = float(os.environ.get("BRAID_TORCH_EXIT_WAIT", "30"))
    if not _C.wait_all_idle(wait):
        print(f"braid_torch: operations still running at exit after {wait:g} s", file=sys.stderr)


atexit.register(_drain_at_exit)

if BACKEND_NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["cpu", "cuda"])
