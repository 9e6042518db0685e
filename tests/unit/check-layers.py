#!/usr/bin/python3
"""The layering of libtxl and of the Python package models/txlgen.

libtxl: each job is a room, a source file and the header of the same
name (a kernel file of one instruction set, txl-kernels-avx2.c, and the
headers such files share belong to the room of their stem, txl-kernels).  Rooms live in the folders of lib/,
one folder a layer, listed below from the bottom up.  A room depends on
another when it includes its header or calls a function the other
defines.  The check fails on

  - a cycle between rooms (A uses B, B uses A, directly or around), and
  - a room that reaches up: a lower layer using a room of a higher one.

The public header (the folder include/) is the ABI that every layer may
see: it is no room.

models/txlgen: each module is a room, and an import (also one inside a
function) is a use; the check fails on a cycle.

Usage: check-layers.py SOURCE_ROOT
"""

import collections
import os
import re
import sys

# lib/'s folders from the bottom up: a room may use its own layer's rooms
# and lower ones only.
LAYERS = ["base", "kernels", "model", "compute", "api"]
PUBLIC = "include"
ISA_SUFFIX = re.compile(r"-(avx2|avx512|avx512bf16|avxvnni|x86|simd|q4|q16)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a definition: a line that starts with the name at column 0 (the style
# of lib/: return type on the line before), not static
DEFINITION = re.compile(r"^(txl_[a-z0-9_]+)\s*\(", re.M)
CALL = re.compile(r"\b(txl_[a-z0-9_]+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def room_of(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    return ISA_SUFFIX.sub("", stem)


def lib_rooms(lib):
    """room -> (layer, [files]); file name -> room."""
    rooms, by_name = {}, {}
    for layer in os.listdir(lib):
        folder = os.path.join(lib, layer)
        if not os.path.isdir(folder) or layer == PUBLIC:
            continue
        if layer not in LAYERS:
            sys.exit(f"check-layers: {folder}: a folder that is no layer "
                     f"(layers: {', '.join(LAYERS)}); add it to LAYERS")
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h", ".cc")):
                continue
            room = room_of(name)
            have = rooms.setdefault(room, (layer, []))
            if have[0] != layer:
                sys.exit(f"check-layers: room {room} is split between "
                         f"{have[0]}/ and {layer}/")
            have[1].append(os.path.join(folder, name))
            by_name[name] = room
    return rooms, by_name


def lib_edges(rooms, by_name):
    """(from room, to room) -> a reason, for every use between rooms."""
    texts = {f: COMMENT.sub(" ", open(f, encoding="utf-8").read())
             for _, files in rooms.values() for f in files}
    defined = {}
    for f, text in texts.items():
        if f.endswith((".c", ".cc")):
            for name in DEFINITION.findall(text):
                defined[name] = room_of(f)
    edges = {}
    for f, text in texts.items():
        src = room_of(f)
        for inc in INCLUDE.findall(text):
            dst = by_name.get(os.path.basename(inc))
            if dst and dst != src:
                edges.setdefault((src, dst), f"{f} includes {inc}")
        if f.endswith((".c", ".cc")):
            for name in CALL.findall(text):
                dst = defined.get(name)
                if dst and dst != src:
                    edges.setdefault((src, dst), f"{f} calls {name}()")
    return edges


def python_edges(pkg):
    """(module, module) -> reason: the package's imports of its own."""
    mods = {os.path.splitext(n)[0] for n in os.listdir(pkg)
            if n.endswith(".py")}
    pat = re.compile(r"^\s*(?:from\s+\.(\w*)\s+import\s+([\w, ()]+)"
                     r"|import\s+txlgen\.(\w+)|from\s+txlgen\.(\w+)\s+import)",
                     re.M)
    edges = {}
    for m in sorted(mods):
        path = os.path.join(pkg, m + ".py")
        for rel, names, abs1, abs2 in pat.findall(open(path, encoding="utf-8").read()):
            if rel:
                targets = [rel]
            elif abs1 or abs2:
                targets = [abs1 or abs2]
            else:           # from . import a, b
                targets = [n.strip() for n in names.strip("()").split(",")]
            for t in targets:
                if t in mods and t != m:
                    edges.setdefault((m, t), f"{path} imports {t}")
    return edges


def cycles(nodes, edges):
    """The strongly connected components of more than one node."""
    succ = collections.defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):                       # Tarjan, recursive: rooms are few
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def report_cycles(kind, comps, edges):
    for comp in comps:
        print(f"FAIL: a cycle between the {kind} {', '.join(comp)}:")
        for (a, b), why in sorted(edges.items()):
            if a in comp and b in comp:
                print(f"  {a} -> {b}: {why}")
    return bool(comps)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check-layers.py SOURCE_ROOT")
    root = sys.argv[1]
    rooms, by_name = lib_rooms(os.path.join(root, "lib"))
    edges = lib_edges(rooms, by_name)
    fail = report_cycles("rooms of lib/", cycles(rooms, edges), edges)
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    for (a, b), why in sorted(edges.items()):
        la, lb = rooms[a][0], rooms[b][0]
        if rank[la] < rank[lb]:
            print(f"FAIL: {a} ({la}/) reaches up to {b} ({lb}/): {why}")
            fail = True
    pkg = os.path.join(root, "models", "txlgen")
    pedges = python_edges(pkg)
    mods = {a for a, _ in pedges} | {b for _, b in pedges}
    fail |= report_cycles("modules of models/txlgen", cycles(mods, pedges),
                          pedges)
    if fail:
        sys.exit(1)
    print(f"ok: {len(rooms)} rooms on {len(LAYERS)} layers, "
          f"{len(edges)} uses, no cycle, none reaching up; "
          f"{len(mods)} Python modules, no import cycle")


if __name__ == "__main__":
    main()
