"""DistributedDataParallel against Gloo, and FSDP2 against one process."""

import pytest

import dist_checks
import harness


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_matches_gloo(world, tmp_path):
    harness.run_ranks(dist_checks.ddp, world, tmp_path)


def test_ddp_reproducible_same_bits_under_every_algorithm_and_rank_order(tmp_path):
    """braid_torch.set_reproducible: DDP ends with the same weights, bit for bit,
    whatever NCCL_ALGO and whichever rank holds which data shard."""
    import torch
    runs = [("ring", [0, 1, 2]), ("tree", [2, 0, 1]), ("recursivedoubling", [1, 2, 0]), ("halvingdoubling", [0, 2, 1]),
            ("direct", [1, 0, 2]), ("ring", [2, 1, 0])]
    weights = []
    for i, (algo, shuffle) in enumerate(runs):
        out = tmp_path / f"weights{i}.pt"
        harness.run_ranks(dist_checks.ddp_reproducible, 3, tmp_path, algo, shuffle, str(out), name=f"store{i}")
        weights.append(torch.load(out))
    for (algo, shuffle), w in zip(runs[1:], weights[1:]):
        assert torch.equal(w.view(torch.int32), weights[0].view(torch.int32)), f"{algo} {shuffle} differs"


def test_fsdp2_fully_shard(tmp_path):
    harness.run_ranks(dist_checks.fsdp, 2, tmp_path)
