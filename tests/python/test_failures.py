"""Timeouts: a wait() with a timeout, and a collective whose peer never comes."""

import os
import subprocess
import sys

import dist_checks
import harness


def test_timeout_names_operation_and_rank(tmp_path):
    harness.run_ranks(dist_checks.timeout, 2, tmp_path, timeout=60)


def test_any_source_timeout_names_rank_and_counts(tmp_path):
    harness.run_ranks(dist_checks.any_source_timeout, 2, tmp_path, timeout=60)


def test_subgroup_timeout(tmp_path):
    harness.run_ranks(dist_checks.subgroup_timeout, 2, tmp_path, timeout=100)


def test_exit_without_destroy_after_failure():
    # Before braid_torch drained its workers at exit, a rank aborted here
    # ("terminate called without an active exception") in most runs.
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exit_script.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert "terminate called" not in out.stderr
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("timed out") == 2, out.stdout
