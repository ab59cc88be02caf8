"""Data-parallel training with PyTorch DDP on braid, as users write it.

Switching a CPU job from Gloo to braid is the import and one word:

    import braid_torch
    dist.init_process_group("braid")

Run it with torchrun (examples/README.md):

    torchrun --standalone --nproc-per-node 4 examples/pytorch_ddp/train_ddp.py
    torchrun --standalone --nproc-per-node 4 examples/pytorch_ddp/train_ddp.py --backend gloo

Each rank trains the same MLP on its own batches of a synthetic regression
problem; DDP averages the gradients. Rank 0 prints the loss per epoch, and at
the end every rank checks that its weights are the same bits as rank 0's
(printed on the WEIGHTS line, which the tests compare with Gloo's).
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="braid")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="batches per epoch")
    args = parser.parse_args()
    if args.backend == "braid":
        import braid_torch  # noqa: F401  (registers the "braid" backend)

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts them)
    model = DDP(torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    truth = torch.randn(8, 2, generator=torch.Generator().manual_seed(7))
    for epoch in range(1, args.epochs + 1):
        total = torch.zeros(1)
        for step in range(args.steps):
            g = torch.Generator().manual_seed(1000 * epoch + 100 * step + rank)
            x = torch.randn(16, 8, generator=g)
            y = torch.tanh(x @ truth) + 0.01 * torch.randn(16, 2, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}  loss {total.item() / (world * args.steps):.6f}", flush=True)

    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    first = weights.clone()
    dist.broadcast(first, 0)
    same = torch.tensor([int(torch.equal(first, weights))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    if rank == 0:
        print("BACKEND", dist.get_backend())
        print("WEIGHTS", " ".join(f"{v:.9e}" for v in weights.tolist()))
        print("same weights on every rank" if same.item() else "weights DIFFER between ranks")
    dist.destroy_process_group()
    raise SystemExit(0 if same.item() else 1)


if __name__ == "__main__":
    main()
