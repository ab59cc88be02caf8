"""Every operation of the braid backend against Gloo's result, on 2, 3 and 4 ranks."""

import pytest

import dist_checks
import harness

REDUCING = ["check_allreduce", "check_refusals", "check_coalesced", "check_reduce_scatter"]
MOVING = ["check_broadcast_reduce", "check_allgather", "check_alltoall", "check_gather_scatter", "check_p2p",
          "check_any_source", "check_async", "check_objects"]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_reductions_match_gloo(world, tmp_path):
    harness.run_ranks(dist_checks.run_checks, world, tmp_path, REDUCING)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_data_movement_matches_gloo(world, tmp_path):
    harness.run_ranks(dist_checks.run_checks, world, tmp_path, MOVING)


def test_every_check_is_run():
    assert sorted(REDUCING + MOVING) == sorted(f.__name__ for f in dist_checks.ALL_CHECKS)
