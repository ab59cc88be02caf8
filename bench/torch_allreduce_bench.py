"""torch.distributed.all_reduce on CPU tensors: braid against Gloo, in one run.

    python bench/torch_allreduce_bench.py [--ranks 2] [--min 4K] [--max 64M]

Starts --ranks local processes itself. Each process has a braid process group
(the default group) and a Gloo group over the same ranks, so both backends run
on the same machine at the same moment: sizes are measured in turns, a block of
braid iterations then a block of Gloo ones, --rounds times, and the median block
is reported. Time is one all_reduce (float32, SUM, async_op=False) as rank 0
sees it; busbw = bytes * 2(n-1)/n / time, as all_reduce_perf reports it.

Needs braid_torch importable (pip install --no-build-isolation ./python, or
PYTHONPATH pointing at a build) and libbraid found (BRAID_LIBRARY).
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def iterations_for(nbytes, budget_bytes):
    return max(3, min(200, budget_bytes // max(nbytes, 1)))


def time_block(tensor, group, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    return (time.perf_counter() - start) / iters


def worker(rank, world, store_path, args, queue):
    import braid_torch  # noqa: F401
    dist.init_process_group("braid", init_method=f"file://{store_path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    groups = {"braid": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    size = args.min
    while size <= args.max:
        for name, group in groups.items():  # a wrong answer would make the timing meaningless
            probe = torch.full((size // 4,), float(rank + 1))
            dist.all_reduce(probe, group=group)
            if not torch.equal(probe, torch.full_like(probe, world * (world + 1) / 2)):
                raise RuntimeError(f"{name}: wrong all_reduce result at {human(size)}")
        tensor = torch.ones(size // 4, dtype=torch.float32)
        iters = iterations_for(size, args.budget)
        for name, group in groups.items():  # warm up: connections, buffers, caches
            time_block(tensor, group, max(1, iters // 4))
        samples = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, group in groups.items():
                samples[name].append(time_block(tensor, group, iters))
        rows.append((size, iters, {name: statistics.median(s) for name, s in samples.items()}))
        size *= args.factor
    if rank == 0:
        queue.put(rows)
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--min", type=parse_size, default=parse_size("4K"))
    p.add_argument("--max", type=parse_size, default=parse_size("64M"))
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5, help="blocks per backend and size (median reported)")
    p.add_argument("--budget", type=parse_size, default=parse_size("256M"),
                   help="bytes per block, which sets the iterations per block (3..200)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(worker, args=(args.ranks, os.path.join(tmp, "store"), args, queue),
                           nprocs=args.ranks, start_method="spawn")
    rows = queue.get()
    n = args.ranks
    import braid_torch
    print(f"# torch {torch.__version__}, {braid_torch.braid_version()}, {n} ranks, "
          f"{os.cpu_count()} CPUs, median of {args.rounds} blocks")
    print("| size | iters | braid time (us) | braid busbw (GB/s) | gloo time (us) | gloo busbw (GB/s) "
          "| braid speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size, iters, t in rows:
        bw = {k: size * 2 * (n - 1) / n / v / 1e9 for k, v in t.items()}
        print(f"| {human(size)} | {iters} | {t['braid'] * 1e6:.1f} | {bw['braid']:.2f} | "
              f"{t['gloo'] * 1e6:.1f} | {bw['gloo']:.2f} | {t['gloo'] / t['braid']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
