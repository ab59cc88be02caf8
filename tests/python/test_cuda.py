"""CUDA tensors through the braid backend: runs only with a GPU, a braid_torch
built with BRAID_TORCH_CUDA=1 (python_torch_cuda_build builds one) and a
libbraid that runs collectives on device memory."""

import pytest
import torch

import braid_torch
import dist_checks
import harness

needs_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and braid_torch.built_with_cuda() and braid_torch.device_buffers_supported()),
    reason="needs a GPU, braid_torch built with BRAID_TORCH_CUDA=1 and a libbraid with a device path")


def cuda_ops(rank, world, store_path):
    gloo = dist_checks.init(rank, world, store_path)
    chk = dist_checks.Checker(rank)
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda")
    x = dist_checks.gen(rank, (1 << 16,), torch.float32, 400)
    t = x.to(dev)
    work = torch.distributed.all_reduce(t, async_op=True)
    work.wait()  # the current stream now waits for the communication stream
    want = x.clone()
    torch.distributed.all_reduce(want, group=gloo)
    chk.same("cuda allreduce", t.cpu(), want)
    out = torch.empty(world * 5, device=dev)
    torch.distributed.all_gather_into_tensor(out, torch.full((5,), float(rank), device=dev))
    chk.same("cuda all_gather_into_tensor", out.cpu(), torch.arange(world).float().repeat_interleave(5))
    fut = torch.distributed.all_reduce(torch.ones(3, device=dev), async_op=True).get_future()
    chk.same("cuda future", fut.wait()[0].cpu(), torch.full((3,), float(world)))
    chk.done()


@needs_gpu
def test_cuda_tensors(tmp_path):
    harness.run_ranks(cuda_ops, 2, tmp_path)
