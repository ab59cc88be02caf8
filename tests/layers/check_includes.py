#!/usr/bin/env python3
"""The include graph against the layers declared in CMakeLists.txt.

Reads the manifest that src/layers.cmake writes (one line per layer:
name|folders|layers it depends on) and checks every #include "..." of the
library's sources:
  - it names "<folder>/<path>" of a declared folder (or nccl.h / braid.h);
  - the folder is in the including file's layer or in a layer below it;
  - the folders (src/engine/lanes, transports/tcp, ...) include each other
    without a cycle, inside a layer as well as across layers;
  - every file puts its code in its folder's namespace, braid::<folder name>
    (src/base: braid), and opens another folder's namespace only in a header
    and only to declare (no function bodies there).
Exits 1 and lists every violation otherwise.

  check_includes.py --manifest build/layers/manifest.txt --root .
  check_includes.py --self-test     # proves the checks catch a broken tree
"""
import argparse
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
NAMESPACE_OPEN = re.compile(r'^namespace (braid(?:::\w+)*) \{', re.M)
FUNCTION_BODY = re.compile(r'\)\s*(?:const\s*)?(?:override\s*)?\{')
BASE_FOLDER = "src/base"
PUBLIC_HEADERS = {"nccl.h", "braid.h"}
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".inc")


def read_manifest(path):
    layers = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        name, dirs, deps = (line.split("|") + ["", ""])[:3]
        layers[name] = {"dirs": [d for d in dirs.split(";") if d], "deps": [d for d in deps.split(";") if d]}
    return layers


def visible_layers(layers):
    """Each layer and every layer below it, transitively."""
    seen = {}

    def visit(name):
        if name not in seen:
            seen[name] = {name}
            for dep in layers[name]["deps"]:
                seen[name] |= visit(dep)
        return seen[name]

    for name in layers:
        visit(name)
    return seen


def folder_of(rel):
    """The component a file belongs to: its folder below the layer folder."""
    parts = rel.split("/")
    depth = 3 if parts[0] == "src" else 2
    return "/".join(parts[: min(depth, len(parts) - 1)])


def check(root, layers):
    leaf_to_dir = {}
    dir_to_layer = {}
    for name, layer in layers.items():
        for d in layer["dirs"]:
            leaf_to_dir[os.path.basename(d)] = d
            dir_to_layer[d] = name
    visible = visible_layers(layers)
    problems = []
    edges = {}
    for d, layer in sorted(dir_to_layer.items()):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith(SOURCE_SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                text = open(os.path.join(root, rel), errors="replace").read()
                problems += namespace_problems(rel, text)
                for inc in INCLUDE.findall(text):
                    if inc in PUBLIC_HEADERS:
                        continue
                    head = inc.split("/")[0]
                    if head not in leaf_to_dir or ".." in inc.split("/"):
                        problems.append(f'{rel}: #include "{inc}" does not name a layer folder '
                                        f'("<folder>/<file>", folders: {", ".join(sorted(leaf_to_dir))})')
                        continue
                    target_dir = leaf_to_dir[head]
                    target = os.path.join(target_dir, inc[len(head) + 1:])
                    if not os.path.exists(os.path.join(root, target)):
                        problems.append(f'{rel}: #include "{inc}": no such file')
                        continue
                    target_layer = dir_to_layer[target_dir]
                    if target_layer not in visible[layer]:
                        problems.append(f'{rel} (layer {layer}) includes {target} (layer {target_layer}): '
                                        f'{layer} does not depend on {target_layer}')
                    a, b = folder_of(rel), folder_of(target)
                    if a != b:
                        edges.setdefault(a, {}).setdefault(b, rel + " -> " + target)
    problems += cycles(edges)
    return problems


def own_namespace(rel):
    """braid::<name of the file's folder>; src/base is braid itself."""
    folder = os.path.dirname(rel)
    return "braid" if folder == BASE_FOLDER else "braid::" + os.path.basename(folder)


def namespace_problems(rel, text):
    own = own_namespace(rel)
    opened = list(NAMESPACE_OPEN.finditer(text))
    problems = []
    if opened and not any(m.group(1) == own or m.group(1).startswith(own + "::") for m in opened):
        problems.append(f"{rel}: its code is not in its folder's namespace {own}")
    for m in opened:
        name = m.group(1)
        if name == own or name.startswith(own + "::"):
            continue
        close = text.find("}  // namespace " + name, m.end())
        block = text[m.end():close if close >= 0 else len(text)]
        if not rel.endswith(".h") or FUNCTION_BODY.search(block):
            problems.append(f"{rel}: opens namespace {name}, which is not its folder's ({own}); "
                            f"only a header may, and only to declare")
    return problems


def cycles(edges):
    """One line per strongly connected set of folders (Tarjan), with an example edge each."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                members = sorted(group)
                examples = [edges[x][y] for x in members for y in members if y in edges.get(x, {})]
                out.append("include cycle among " + ", ".join(members) + ": " + "; ".join(examples))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def self_test():
    """A small tree with an upward include, a sideways cycle and a stray path."""
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/low/a.h": '#include "low/b.h"\n',
            "src/low/b.h": '#include "high/c.h"\n',            # upward
            "src/high/c.h": '\n',
            "src/high/x/d.h": '#include "high/y/e.h"\n',       # cycle x <-> y
            "src/high/y/e.h": '#include "high/x/d.h"\n',
            "src/high/f.cc": '#include "../low/a.h"\n#include "nccl.h"\n',  # not "<folder>/..."
            "src/high/g.cc": 'namespace braid::high {\n}  // namespace braid::high\n',
            "src/high/x/h.h": 'namespace braid::y {\nstruct E;\n}  // namespace braid::y\n'
                              'namespace braid::x {\n}  // namespace braid::x\n',  # declares only: fine
            "src/high/x/i.cc": 'namespace braid::high {\nint f() { return 1; }\n}  // namespace braid::high\n',
            "src/low/j.h": 'namespace braid::low {\n}  // namespace braid::low\n'
                           'namespace braid::high {\nint g() { return 2; }\n}  // namespace braid::high\n',
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), "w").write(text)
        layers = {"low": {"dirs": ["src/low"], "deps": []}, "high": {"dirs": ["src/high"], "deps": ["low"]}}
        found = check(root, layers)
        expected = ["src/low/b.h (layer low) includes src/high/c.h", "include cycle among src/high/x, src/high/y",
                    'src/high/f.cc: #include "../low/a.h" does not name a layer folder',
                    "src/high/x/i.cc: its code is not in its folder's namespace braid::x",
                    "src/high/x/i.cc: opens namespace braid::high",
                    "src/low/j.h: opens namespace braid::high"]
        missing = [e for e in expected if not any(p.startswith(e) for p in found)]
        if missing or len(found) != len(expected):
            print("self-test FAILED: expected", expected, "got", found)
            return 1
        os.remove(os.path.join(root, "src/low/b.h"))
        open(os.path.join(root, "src/low/b.h"), "w").write("\n")
        for rel in ("src/high/x/d.h", "src/high/f.cc"):
            open(os.path.join(root, rel), "w").write('#include "low/a.h"\n')
        for rel in ("src/high/x/i.cc", "src/low/j.h"):
            os.remove(os.path.join(root, rel))
        found = check(root, layers)
        if found:
            print("self-test FAILED: a clean tree reported", found)
            return 1
    print("self-test passed: an upward include, a folder cycle, a relative include and code in another "
          "folder's namespace are caught")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest")
    p.add_argument("--root", default=".")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        return self_test()
    layers = read_manifest(a.manifest)
    problems = check(a.root, layers)
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} problem(s) with the layers declared in CMakeLists.txt")
        return 1
    print(f"include graph: {len(layers)} layers, one-way, no folder cycle; every file in its folder's namespace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
