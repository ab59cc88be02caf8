"""A CPU DDP training script as users write it; the backend is its only argument.

Switching from Gloo to braid is the import and the one word:
    import braid_torch
    dist.init_process_group("braid")
Run under torchrun (env://); rank 0 prints the trained weights.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

backend = sys.argv[1]
if backend == "braid":
    import braid_torch  # noqa: F401

dist.init_process_group(backend)
rank = dist.get_rank()
torch.manual_seed(rank)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(20):
    g = torch.Generator().manual_seed(100 * step + rank)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 2, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
if rank == 0:
    print("BACKEND", dist.get_backend())
    print("WEIGHTS", " ".join(f"{v:.9e}" for v in weights.tolist()))
dist.destroy_process_group()
