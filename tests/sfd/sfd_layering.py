#!/usr/bin/env python3
"""The call graph of daemon/sfd, read from its object files, and its cycles.

An edge a.c -> b.c means a.o refers to a symbol (function or object) that b.o
defines: nm lists what each object defines and what it leaves undefined. The
strongly connected components of that graph are the groups of files that
reach each other; the check fails when one holds more than --max files, so a
circle like "windows -> cluster -> windows" cannot grow back unnoticed. A
circle named with --known (docs/LAYOUT.md says why it stays) may remain, but
never grow: a component that is not within it fails too.

usage: sfd_layering.py [--max N] [--known a.c,b.c,...] [--dot] OBJECT...
"""
import argparse
import os
import subprocess
import sys


def source_name(obj):
    base = os.path.basename(obj)
    for suffix in ('.o', '.obj'):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def symbols(nm, obj):
    out = subprocess.run([nm, '-P', obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == 'U':
            undefined.add(name)
        elif kind.isupper():  # global definitions; lower case are file-local
            defined.add(name)
    return defined, undefined


def call_graph(nm, objects):
    files = {}
    for obj in objects:
        files[source_name(obj)] = symbols(nm, obj)
    owner = {}
    for f, (defined, _) in files.items():
        for s in defined:
            owner[s] = f
    graph = {f: set() for f in files}
    for f, (_, undefined) in files.items():
        for s in undefined:
            g = owner.get(s)
            if g is not None and g != f:
                graph[f].add(g)
    return graph


def components(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max', type=int, default=2, help='largest cycle allowed (files)')
    ap.add_argument('--nm', default='nm')
    ap.add_argument('--known', default='', help='comma-separated files of a circle allowed to stay')
    ap.add_argument('--dot', action='store_true', help='print the graph as Graphviz dot')
    ap.add_argument('objects', nargs='+')
    args = ap.parse_args()
    # CMake hands $<TARGET_OBJECTS:...> over as one ';'-separated argument.
    objects = [o for arg in args.objects for o in arg.split(';') if o]
    graph = call_graph(args.nm, objects)
    if args.dot:
        print('digraph sfd {')
        for f in sorted(graph):
            for g in sorted(graph[f]):
                print(f'  "{f}" -> "{g}";')
        print('}')
    cycles = [c for c in components(graph) if len(c) > 1]
    cycles.sort(key=len, reverse=True)
    known = set(f for f in args.known.split(',') if f)
    missing = known - set(graph)
    if missing:
        print(f'FAIL: --known names files that are not in the graph: {sorted(missing)}',
              file=sys.stderr)
        return 1
    print(f'{len(graph)} files, {sum(len(v) for v in graph.values())} edges, '
          f'largest cycle {len(cycles[0]) if cycles else 1} file(s); '
          f'allowed {args.max}, and the known circle of {len(known)}')
    for c in cycles:
        mark = ' (within the known circle)' if len(c) > args.max and set(c) <= known else ''
        print(f'  cycle of {len(c)}: ' + ' '.join(c) + mark)
    too_big = [c for c in cycles if len(c) > args.max and not set(c) <= known]
    if too_big:
        print(f'FAIL: {len(too_big)} cycle(s) of more than {args.max} files in daemon/sfd',
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
