"""Error of braid's wire types against the float32 allreduce, on gradient-like data.

Every rank draws a float32 tensor (normal, sd 1e-3; with --outliers one value
in 10^4 is 1) from its own seed; the allreduce sum runs once in float32 and once per wire type on
the same inputs, and the largest error of each against the exact (float64) sum
is printed, absolute and relative to the largest |sum|, with float32's beside
it, and the root-mean-square error relative to the sums' root mean square.

    PYTHONPATH=build/tests/python/braid_torch_build/lib BRAID_LIBRARY=build/libbraid.so.0 \
        python3 bench/wire_error.py --ranks 4 --count 4194304
"""

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def contribution(rank, count, outliers):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(count, generator=g) * 1e-3
    if outliers:
        x[torch.randint(0, count, (count // 10000,), generator=g)] = 1.0
    return x


def run(rank, world, count, store, wires, outliers):
    import braid_torch  # registers "braid"
    dist.init_process_group("braid", init_method=f"file://{store}", rank=rank, world_size=world)
    exact = sum(contribution(r, count, outliers).double() for r in range(world))
    scale = exact.abs().max().item()
    for wire in [None] + wires:
        braid_torch.set_wire_type(None, wire)
        x = contribution(rank, count, outliers)
        dist.all_reduce(x)
        diff = x.double() - exact
        err = diff.abs().max().item()
        rms = (diff.pow(2).mean().sqrt() / exact.pow(2).mean().sqrt()).item()
        if rank == 0:
            print(f"{wire or 'float32':>8}: largest error {err:.3g} ({err / scale:.3g} of the largest |sum| {scale:.3g}); "
                  f"rms error {rms:.3g} of the sums' rms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--count", type=int, default=1 << 22)
    p.add_argument("--wires", default="bf16,fp16,fp8e4m3,fp8e5m2")
    p.add_argument("--outliers", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run, args=(a.ranks, a.count, os.path.join(d, "store"), a.wires.split(","), a.outliers), nprocs=a.ranks)
