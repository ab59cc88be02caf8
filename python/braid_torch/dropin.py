"""Run an unmodified PyTorch program whose backend is "nccl" on braid.

    python -m braid_torch.dropin check
        Lists the NCCL functions the installed torch's libtorch_cuda.so imports
        and says whether braid exports each one (exit 1 if any is missing).
    python -m braid_torch.dropin run [--lib PATH] -- PROGRAM ARGS...
        Checks, then runs PROGRAM with LD_PRELOAD naming braid's libnccl.so.2,
        so that PyTorch's own ProcessGroupNCCL calls braid instead of NVIDIA's
        NCCL. torchrun works as PROGRAM: its worker processes inherit LD_PRELOAD.

libbraid is found as braid_torch finds it (BRAID_LIBRARY, the path recorded at
build time, then libbraid.so.0 on the loader path; pass --lib otherwise).
This module reads ELF files itself, so it needs neither binutils nor a GPU.
"""

import argparse
import mmap
import os
import struct
import sys

SHT_DYNSYM = 11


def dynamic_symbols(path):
    """(defined, undefined): the names in the dynamic symbol table of an ELF64 file."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:4] != b"\x7fELF" or m[4] != 2 or m[5] != 1:
            raise ValueError(f"{path}: not a little-endian ELF64 file")
        shoff, = struct.unpack_from("<Q", m, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", m, 0x3A)
        sections = []
        for i in range(shnum):
            base = shoff + i * shentsize
            sh_type, = struct.unpack_from("<I", m, base + 4)
            offset, size = struct.unpack_from("<QQ", m, base + 0x18)
            link, = struct.unpack_from("<I", m, base + 0x28)
            entsize, = struct.unpack_from("<Q", m, base + 0x38)
            sections.append((sh_type, offset, size, link, entsize))
        defined, undefined = set(), set()
        for sh_type, offset, size, link, entsize in sections:
            if sh_type != SHT_DYNSYM or entsize == 0:
                continue
            strtab = sections[link][1]
            for k in range(1, size // entsize):  # entry 0 is the null symbol
                name_off, = struct.unpack_from("<I", m, offset + k * entsize)
                shndx, = struct.unpack_from("<H", m, offset + k * entsize + 6)
                end = m.find(b"\0", strtab + name_off)
                name = m[strtab + name_off:end].decode()
                (undefined if shndx == 0 else defined).add(name)
        return defined, undefined


def torch_cuda_library():
    """libtorch_cuda.so of the installed torch, or None for a CPU-only build."""
    import torch
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    return path if os.path.exists(path) else None


def find_braid(explicit=None):
    candidates = [explicit, os.environ.get("BRAID_LIBRARY")]
    try:
        from ._build_config import BRAID_LIBRARY as recorded
        candidates.append(recorded)
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.exists(c):
            return os.path.realpath(c)
    import ctypes.util
    found = ctypes.util.find_library("braid")
    if found:
        return found
    sys.exit("braid_torch.dropin: cannot find libbraid; pass --lib or set BRAID_LIBRARY")


def preload_name(braid_path):
    """braid's libnccl.so.2 beside libbraid when it exists (the name NCCL users know)."""
    candidate = os.path.join(os.path.dirname(braid_path), "libnccl.so.2")
    if os.path.exists(candidate) and os.path.realpath(candidate) == os.path.realpath(braid_path):
        return candidate
    return braid_path


def check(braid_path, out=sys.stdout):
    """Prints the comparison; returns the NCCL names torch needs and braid lacks
    (None when this torch has no CUDA library, so there is nothing to check)."""
    torch_cuda = torch_cuda_library()
    if torch_cuda is None:
        print("this torch has no libtorch_cuda.so (a CPU-only build): its 'nccl' backend does not "
              "exist, so there is nothing to run on braid through LD_PRELOAD", file=out)
        return None
    _, needed = dynamic_symbols(torch_cuda)
    needed = sorted(n for n in needed if n.startswith("nccl"))
    exported, _ = dynamic_symbols(braid_path)
    missing = [n for n in needed if n not in exported]
    print(f"{torch_cuda} imports {len(needed)} NCCL functions; {braid_path} exports "
          f"{len(needed) - len(missing)} of them", file=out)
    for n in needed:
        print(f"  {'ok     ' if n in exported else 'MISSING'} {n}", file=out)
    return missing


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m braid_torch.dropin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", help="path of libbraid.so (default: as braid_torch finds it)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    run = sub.add_parser("run")
    run.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    braid_path = find_braid(args.lib)
    missing = check(braid_path, out=sys.stdout if args.command == "check" else sys.stderr)
    if args.command == "check":
        return 1 if missing else 0
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("run needs a program")
    if missing:
        sys.exit(f"braid lacks {missing}: the program would fail to load")
    env = dict(os.environ)
    preload = preload_name(braid_path)
    env["LD_PRELOAD"] = preload + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    print(f"braid_torch.dropin: LD_PRELOAD={env['LD_PRELOAD']}", file=sys.stderr)
    os.execvpe(program[0], program, env)


if __name__ == "__main__":
    sys.exit(main())
