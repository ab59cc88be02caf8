"""Builds braid_torch: the torch.distributed backend "braid".

The C++ extension compiles against the torch that is installed, so build
without pip's build isolation:

    pip install --no-build-isolation ./python

Environment read at build time:
  BRAID_INCLUDE_DIR  directory holding braid's nccl.h (default: ../include of this
                     checkout, else $BRAID_PREFIX/include)
  BRAID_PREFIX       an install prefix of braid (cmake --install ... --prefix)
  BRAID_LIBRARY      libbraid.so to record as the default at run time (default:
                     $BRAID_PREFIX/lib/libbraid.so.0, else ../build/libbraid.so.0)
  BRAID_TORCH_CUDA   1: build the CUDA-tensor path (needs the CUDA toolkit),
                     0: host tensors only; unset: CUDA when torch sees a GPU
"""

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    import torch
    from torch.utils import cpp_extension
except ImportError:
    sys.exit("braid_torch compiles against the installed torch: install torch 2.x first, then "
             "`pip install --no-build-isolation ./python`")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def find_include():
    prefix = os.environ.get("BRAID_PREFIX")
    candidates = [os.environ.get("BRAID_INCLUDE_DIR"), REPO / "include",
                  prefix and Path(prefix) / "include"]
    for c in candidates:
        if c and (Path(c) / "nccl.h").is_file() and \
                "BRAID_NCCL_HEADER" in (Path(c) / "nccl.h").read_text(errors="replace"):
            return str(c)
    sys.exit("braid_torch: cannot find braid's nccl.h; set BRAID_INCLUDE_DIR or BRAID_PREFIX")


def find_library():
    prefix = os.environ.get("BRAID_PREFIX")
    candidates = [os.environ.get("BRAID_LIBRARY"),
                  prefix and Path(prefix) / "lib" / "libbraid.so.0",
                  REPO / "build" / "libbraid.so.0"]
    for c in candidates:
        if c and Path(c).exists():
            return str(Path(c).resolve())
    return ""


def want_cuda():
    flag = os.environ.get("BRAID_TORCH_CUDA", "")
    if flag == "0":
        return False
    have_toolkit = torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
    if flag == "1":
        if not have_toolkit:
            sys.exit("braid_torch: BRAID_TORCH_CUDA=1 needs a CUDA build of torch and the CUDA toolkit "
                     "(CUDA_HOME)")
        return True
    return have_toolkit and torch.cuda.is_available()


class BuildPyWithConfig(build_py):
    """Records, next to the package, where libbraid was at build time."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "braid_torch" / "_build_config.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# Written by setup.py at build time.\n"
                          f"BRAID_LIBRARY = {find_library()!r}\n"
                          f"TORCH_VERSION = {torch.__version__!r}\n")


SOURCES = ["module.cc", "any_source.cc", "backend.cc", "bootstrap.cc", "braid_api.cc", "device_sync.cc", "gil.cc",
           "ops_gather.cc", "ops_p2p.cc", "ops_reduce.cc", "tensor_util.cc", "types.cc",
           "work.cc", "worker.cc"]

cuda = want_cuda()
macros = [("BRAID_TORCH_WITH_CUDA", "1")] if cuda else [("BRAID_NO_CUDA_HEADERS", "1")]
Extension = cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension
ext = Extension(
    name="braid_torch._C",
    sources=[str(Path("csrc") / s) for s in SOURCES],
    include_dirs=[find_include()],
    define_macros=macros,
    extra_compile_args={"cxx": ["-O2", "-g0", "-std=c++17", "-Wall", "-Wno-unused-parameter"]},
    libraries=["dl"],
)

os.chdir(HERE)
setup(
    name="braid_torch",
    version="0.1.0",
    description="braid as a torch.distributed process group backend",
    packages=["braid_torch"],
    ext_modules=[ext],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True),
              "build_py": BuildPyWithConfig},
    python_requires=">=3.9",
)
