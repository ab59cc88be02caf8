"""Runs a function in N processes, one per rank, and reports every rank's failure.

Ranks are forked from a forkserver that has already imported torch and
braid_torch, so a test pays torch's import once per session rather than once
per rank. Each rank gets a FileStore path of its own test's temporary
directory: tests running in parallel (ctest -j, pytest -n) never share a port
or a store.
"""

import multiprocessing as mp
import os
import traceback

import torch.distributed as dist

_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(["torch", "torch.distributed", "braid_torch", "harness", "dist_checks"])

DEFAULT_TIMEOUT_S = 150


def _child(fn, rank, world, store_path, args, results):
    try:
        fn(rank, world, store_path, *args)
        results.put((rank, None))
    except BaseException:  # report everything, including SystemExit and assertion failures
        results.put((rank, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:
                pass


def run_ranks(fn, world, tmp_path, *args, timeout=DEFAULT_TIMEOUT_S, name="store"):
    """Runs fn(rank, world, store_path, *args) on `world` ranks; raises with the
    tracebacks of the ranks that failed, did not finish within `timeout` s, or
    exited with a non-zero status."""
    store_path = os.path.join(str(tmp_path), name)
    results = _CTX.SimpleQueue()
    procs = [_CTX.Process(target=_child, args=(fn, r, world, store_path, args, results), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    reports = {}
    while not results.empty():
        rank, err = results.get()
        reports[rank] = err
    failures = []
    for r, p in enumerate(procs):
        if p.is_alive():
            p.kill()
            p.join()
            failures.append(f"rank {r}: still running after {timeout} s (killed)")
        elif r not in reports:
            failures.append(f"rank {r}: exited with code {p.exitcode} without reporting")
        elif reports[r] is not None:
            failures.append(f"rank {r}:\n{reports[r]}")
        elif p.exitcode != 0:
            failures.append(f"rank {r}: passed, then exited with code {p.exitcode}")
    if failures:
        raise AssertionError(f"{len(failures)} of {world} ranks failed:\n" + "\n".join(failures))
