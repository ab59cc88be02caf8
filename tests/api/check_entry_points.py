#!/usr/bin/env python3
"""Every exported entry point of src/api catches what its body throws.

An entry point is a definition that starts with BRAID_NCCL_API(...) or
extern "C" BRAID_EXPORT; its body must be a function-try-block ("... try {",
closed by BRAID_API_CATCH(name) or a catch returning a neutral value), so
that no C++ exception crosses the C API.
  check_entry_points.py <src/api folder>
"""
import glob
import os
import re
import sys

START = re.compile(r'^(BRAID_NCCL_API\(|extern "C" BRAID_EXPORT )')


def unguarded(path):
    lines = open(path).read().split("\n")
    found = []
    for i, line in enumerate(lines):
        if not START.match(line):
            continue
        text = "\n".join(lines[i:i + 8])
        brace, semi = text.find("{"), text.find(";")
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration
        if not text[:brace].rstrip().endswith("try"):
            found.append(f"{path}:{i + 1}: {line.strip()}")
    return found


def main():
    folder = sys.argv[1]
    bad = [b for p in sorted(glob.glob(os.path.join(folder, "*.cc"))) for b in unguarded(p)]
    for b in bad:
        print("entry point without a function-try-block:", b)
    if bad:
        return 1
    print("every entry point of", folder, "catches what its body throws")
    return 0


if __name__ == "__main__":
    sys.exit(main())
