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


def test_ddp_wire_types_with_error_feedback_track_float32(tmp_path):
    """braid_torch.set_wire_type + error_feedback_hook: 200 steps of DDP on 3
    ranks whose gradients travel as bf16 end within 1% of the float32 run's loss
    (the mean of the last 20 steps); fp8 e4m3 within 5%."""
    import torch
    losses = {}
    for wire in [None, "bf16", "fp8e4m3"]:
        out = tmp_path / f"losses_{wire}.pt"
        harness.run_ranks(dist_checks.ddp_wire, 3, tmp_path, wire, str(out), name=f"store_{wire}")
        losses[wire] = torch.load(out)
    final = {w: float(l[-20:].mean()) for w, l in losses.items()}
    print("mean loss of the last 20 steps:", final, "first:", float(losses[None][0]))
    assert final[None] < 0.2 * float(losses[None][0]), "the float32 run did not learn"
    assert not torch.equal(losses["bf16"], losses[None]), "the bf16 wire changed nothing: not in effect"
    assert abs(final["bf16"] - final[None]) <= 0.01 * final[None]
    assert abs(final["fp8e4m3"] - final[None]) <= 0.05 * final[None]


def test_fsdp2_fully_shard(tmp_path):
    harness.run_ranks(dist_checks.fsdp, 2, tmp_path)
