"""The backend leaves the process environment alone: private unique ids without
blanking NCCL_COMM_ID, the group's timeout through braidCommSetTimeout."""

import pytest

import dist_checks
import harness


@pytest.mark.parametrize("world", [2, 3])
def test_environment_untouched(world, tmp_path):
    harness.run_ranks(dist_checks.environment_untouched, world, tmp_path, timeout=120)
