"""The code's shape, measured (issue 33 item 8): the largest functions, the longest
parameter lists, how many modules name each backend, topology level and run-directory
file, function-local imports, lines over 100 columns, and the import cycles among lab's
modules (module-level and function-local imports alike).

    .venv/bin/python bench/code_metrics.py [--top 10] [--no-write]

Static: reads lab/ with Python's ast, runs nothing of it.  Writes
bench/results/code_metrics-<time>.json (commit, host, date, load like every bench), so
a refactoring can quote before and after from committed files.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import socket
import subprocess
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "lab"
BACKENDS = ("qemu", "libvirt", "vng")
LEVELS = ("smt", "cluster", "llc", "die", "node", "socket")
RUN_FILES = (
    "results.json", "plan.json", "boot.json", "agent.log", "console.log", "results.tar", "qemu.argv",
    "numbering.json", "verify.json", "junit.xml", "command",
)  # fmt: skip


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _extension(base: str, name: str) -> bool:
    folder = REPO.joinpath(*base.split("."))
    return any(folder.glob(f"{name}.c")) or any(folder.glob(f"{name}.*.so"))


def import_sites(mods: dict[str, Path]) -> list[tuple[str, int, str, bool]]:
    """Every import of a lab module in lab/: (importing module, line, imported lab module,
    whether the import sits inside a function), in file and line order."""
    out = []
    for mod, path in mods.items():
        for node, in_func in _import_nodes(path):
            for t in _targets(mod, path, node, mods):
                out.append((mod, node.lineno, t, in_func))
    return out


def _import_nodes(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """*path*'s import statements, each with whether it sits inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    in_func = {id(x) for f in funcs for x in ast.walk(f) if isinstance(x, (ast.Import, ast.ImportFrom))}
    return [(n, id(n) in in_func) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _targets(mod: str, path: Path, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]) -> list[str]:
    """The lab modules *node* (in *mod*) imports."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        base = _resolve(mod, path.name == "__init__.py", node)
        # a compiled extension (lab/trace/_scan.c built as _scan*.so) is a leaf, not its package
        targets = [
            f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
            for a in node.names
            if not _extension(base, a.name)
        ]
    out = []
    for t in targets:
        while t and t not in mods:
            t = t.rpartition(".")[0]
        if t and t != mod and t.startswith("lab"):
            out.append(t)
    return out


def local_imports(mods: dict[str, Path]) -> list[tuple[str, int, int]]:
    """Every import statement inside a function in lab/ (of anything): (module, first line,
    last line)."""
    return [(mod, n.lineno, n.end_lineno or n.lineno) for mod, path in mods.items() for n, in_func in _import_nodes(path) if in_func]


def imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], int]:
    """lab module -> the lab modules it imports (anywhere in it); and how many imports
    sit inside a function."""
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, _line, t, _local in import_sites(mods):
        graph[mod].add(t)
    return graph, len(local_imports(mods))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    import sys

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def functions(mods: dict[str, Path]) -> list[dict]:
    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                out.append({
                    "function": f"{mod}.{node.name}", "lines": (node.end_lineno or node.lineno) - node.lineno + 1,
                    "params": len(params) + bool(a.vararg) + bool(a.kwarg),
                })  # fmt: skip
    return out


def naming(mods: dict[str, Path], words: tuple[str, ...], pattern: str) -> dict[str, int]:
    """How many modules contain *pattern* formatted with each word (a string literal)."""
    out = {}
    texts = {m: p.read_text() for m, p in mods.items()}
    for w in words:
        rx = re.compile(pattern.format(re.escape(w)))
        out[w] = sum(1 for t in texts.values() if rx.search(t))
    return out


def measure(top: int) -> dict:
    mods = modules()
    graph, local = imports(mods)
    fns = functions(mods)
    long_lines = sum(1 for p in mods.values() for line in p.read_text().splitlines() if len(line) > 100)
    return {
        "modules": len(mods),
        "lines": sum(len(p.read_text().splitlines()) for p in mods.values()),
        "largest_functions": sorted(fns, key=lambda f: -f["lines"])[:top],
        "longest_parameter_lists": sorted(fns, key=lambda f: -f["params"])[:top],
        "modules_naming_backend": naming(mods, BACKENDS, r"""["']{}["']"""),
        "modules_naming_level": naming(mods, LEVELS, r"""\b{}\b"""),
        "modules_naming_run_file": naming(mods, RUN_FILES, r"""["']{}["']"""),
        "function_local_imports": local,
        "lines_over_100_columns": long_lines,
        "import_cycles": cycles(graph),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    m = measure(args.top)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "lab"], cwd=REPO, capture_output=True, text=True).stdout.strip())
    doc = {
        "when": time.strftime("%Y%m%d-%H%M%S"), "commit": commit, "dirty": dirty,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"name": socket.gethostname(), "cpus": os.cpu_count(), "loadavg": list(os.getloadavg())},
        "metrics": m,
    }  # fmt: skip
    print(f"{m['modules']} modules, {m['lines']} lines; {m['function_local_imports']} function-local imports; "
          f"{m['lines_over_100_columns']} lines over 100 columns")  # fmt: skip
    print("largest functions: " + ", ".join(f"{f['function']} {f['lines']}" for f in m["largest_functions"][:5]))
    print("longest parameter lists: " + ", ".join(f"{f['function']} {f['params']}" for f in m["longest_parameter_lists"][:5]))
    print(f"modules naming each backend: {m['modules_naming_backend']}")
    print(f"modules naming each level: {m['modules_naming_level']}")
    print(f"modules naming each run-dir file: {m['modules_naming_run_file']}")
    print(f"import cycles: {len(m['import_cycles'])}" + "".join(f"\n  {' <-> '.join(c)}" for c in m["import_cycles"]))
    if not args.no_write:
        dest = REPO / "bench" / "results" / f"code_metrics-{doc['when']}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
