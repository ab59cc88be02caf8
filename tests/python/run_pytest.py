"""CTest's entry to the PyTorch backend tests: build braid_torch against the
libbraid of this build tree, then run the pytest suite with it.

Exits 77 (CTest's SKIP_RETURN_CODE for this test) when torch or pytest cannot
be imported by this Python; otherwise with the build's or pytest's status.
Arguments after `--` go to pytest.

--cuda builds the CUDA-tensor path instead (BRAID_TORCH_CUDA=1), which needs a
CUDA build of torch and the CUDA toolkit (else exit 77), checks that the module
says so, and runs the two-rank reduction tests on host tensors with it: on a
machine without a GPU this proves only that the CUDA path compiles and links.
"""

import argparse
import os
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--library", required=True, help="libbraid.so of the build tree")
    p.add_argument("--package", required=True, help="the python/ folder of the source tree")
    p.add_argument("--build-dir", required=True)
    p.add_argument("--tests", required=True, help="the tests/python folder")
    p.add_argument("--cuda", action="store_true", help="build and smoke-test the CUDA-tensor path")
    p.add_argument("pytest_args", nargs="*")
    args = p.parse_args()
    for name in ("library", "package", "build_dir", "tests"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    for module in ("torch", "pytest"):
        try:
            __import__(module)
        except ImportError:
            print(f"SKIP: {sys.executable} cannot import {module}; .ci/setup-deps installs the pinned "
                  "torch and pytest", flush=True)
            return 77
    import torch
    env = dict(os.environ)
    env["BRAID_LIBRARY"] = os.path.realpath(args.library)
    env.setdefault("MAX_JOBS", "2")
    if args.cuda:
        from torch.utils import cpp_extension
        if torch.version.cuda is None or cpp_extension.CUDA_HOME is None:
            print(f"SKIP: torch {torch.__version__} is not a CUDA build or there is no CUDA toolkit", flush=True)
            return 77
        env["BRAID_TORCH_CUDA"] = "1"
        args.pytest_args = ["-k", "reductions and 2"] + args.pytest_args
    lib_dir = os.path.join(args.build_dir, "lib")
    start = time.monotonic()
    build = [sys.executable, "setup.py", "-q", "build", "--build-base", args.build_dir, "--build-lib", lib_dir]
    print(f"building braid_torch against torch {torch.__version__}: {' '.join(build)}", flush=True)
    rc = subprocess.call(build, cwd=args.package, env=env)
    if rc != 0:
        print(f"FAILED: building braid_torch (exit {rc})", flush=True)
        return rc
    print(f"built in {time.monotonic() - start:.0f} s", flush=True)
    env["PYTHONPATH"] = os.pathsep.join([lib_dir, args.tests] + [x for x in [env.get("PYTHONPATH")] if x])
    env["OMP_NUM_THREADS"] = "1"  # up to 4 ranks share 2 cores
    if args.cuda:
        probe = "import braid_torch, sys; sys.exit(0 if braid_torch.built_with_cuda() else 1)"
        if subprocess.call([sys.executable, "-c", probe], env=env) != 0:
            print("FAILED: braid_torch built with BRAID_TORCH_CUDA=1 says it has no CUDA path", flush=True)
            return 1
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", args.tests] + args.pytest_args
    return subprocess.call(cmd, cwd=args.tests, env=env)


if __name__ == "__main__":
    sys.exit(main())
