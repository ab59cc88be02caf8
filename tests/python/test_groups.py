"""Subgroups from new_group, two groups in flight, destroy and re-init."""

import pytest

import dist_checks
import harness


@pytest.mark.parametrize("world", [2, 3, 4])
def test_groups(world, tmp_path):
    harness.run_ranks(dist_checks.groups, world, tmp_path)
