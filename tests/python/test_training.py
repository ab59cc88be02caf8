"""DistributedDataParallel against Gloo, and FSDP2 against one process."""

import pytest

import dist_checks
import harness


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_matches_gloo(world, tmp_path):
    harness.run_ranks(dist_checks.ddp, world, tmp_path)


def test_fsdp2_fully_shard(tmp_path):
    harness.run_ranks(dist_checks.fsdp, 2, tmp_path)
