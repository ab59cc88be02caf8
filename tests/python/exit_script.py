"""Two ranks (torch.multiprocessing.spawn) whose unbatched isend/irecv block
each other until the 3 s group timeout; each rank then returns without waiting
for its receive or destroying the group, so its worker thread may still hold
the last references to Python-owned tensors while the interpreter finalizes.
Exits 0 when both ranks exit cleanly (braid_torch drains its workers at exit).
"""

import datetime
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, path):
    import braid_torch  # noqa: F401
    dist.init_process_group("braid", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=3))
    peer = 1 - rank
    a, b = torch.full((1 << 22,), float(rank)), torch.empty(1 << 22)
    failed = False
    try:
        send = dist.isend(a, peer)
        recv = dist.irecv(b, peer)
        send.wait()
        recv.wait()
    except Exception:  # expected: both sends wait for a receive queued behind them
        failed = True
    print(f"rank {rank}: {'timed out' if failed else 'completed'}", flush=True)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(rank_main, args=(2, f"{tmp}/store"), nprocs=2)
    sys.exit(0)
