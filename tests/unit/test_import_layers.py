"""No upward imports (issue 33 item 7): every import of a lab module in lab/, function-local
ones included, goes to the importer's own layer or one below it, by the layer order the
README's Layout section writes; every module under lab/ has a layer there.  And an import
stays inside a function only to defer what it loads, saying so.  The imports are
bench/code_metrics.py's (static, nothing of lab is run)."""

import re
from pathlib import Path

from _bench import bench_module

REPO = Path(__file__).resolve().parents[2]
# (importing module, imported module): an upward import not fixed yet, with the reason.
KNOWN: dict[tuple[str, str], str] = {}
# Why an import is inside a function, on its line or the line above (or above the run of
# import lines it is in), naming what it defers:
#   CLI start (X): the module is loaded by `lab --help` and X is not, X costing a
#     millisecond or more there (python -X importtime -m lab --help; bench/bench_cli_start.py)
#   optional (X): X may be missing (a backend's library)
#   heavy (X): X is slow to import and only some calls need it (scipy)
DEFERRED = re.compile(r"# deferred: ((?:CLI start|optional|heavy) \(([^()]+)\)(?:; )?)+$")


def _metrics():
    return bench_module("code_metrics")


def layers(readme: str) -> list[tuple[str, list[str]]]:
    """The README's Layout section's numbered list: (layer, [its names]), bottom first.  An
    item is `N. **layer**: text`, its text going on over indented lines; its names are the
    words in backquotes."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    items: list[list[str]] = []
    for line in section.splitlines():
        m = re.match(r"(\d+)\. \*\*(.+?)\*\*:(.*)", line)
        if m:
            assert int(m.group(1)) == len(items) + 1, f"README Layout: layer {m.group(1)} out of order"
            items.append([m.group(2), m.group(3)])
        elif items and line.startswith("   ") and line.strip():
            items[-1][1] += " " + line.strip()
    return [(name, re.findall(r"`([^`]+)`", text)) for name, text in items]


def layer_of(order: list[tuple[str, list[str]]], modules: list[str]) -> tuple[dict[str, int], list[str]]:
    """Each module's layer (an index into *order*): the longest name that is the module or
    a package holding it (`lab` is only the package's __init__); and the names that are
    none of *modules*."""
    named: dict[str, int] = {}
    for i, (_layer, names) in enumerate(order):
        for n in names:
            q = "lab" if n == "lab" else f"lab.{n}"
            assert q not in named, f"README Layout: {n} is in two layers"
            named[q] = i
    out = {}
    for m in modules:
        hits = [q for q in named if m == q or (q != "lab" and m.startswith(q + "."))]
        if hits:
            out[m] = named[max(hits, key=len)]
    unused = [q for q in named if not any(m == q or m.startswith(q + ".") for m in modules)]
    return out, unused


def upward(order, layer: dict[str, int], sites, mods) -> list[str]:
    out = []
    for mod, line, target, _local in sites:
        if layer[target] > layer[mod] and (mod, target) not in KNOWN:
            where = mods[mod].relative_to(REPO)
            out.append(f"{where}:{line}: {mod} (layer {layer[mod] + 1}, {order[layer[mod]][0]}) imports "
                       f"{target} (layer {layer[target] + 1}, {order[layer[target]][0]})")  # fmt: skip
    return out


def test_every_module_has_a_layer_and_no_import_goes_up():
    m = _metrics()
    mods = m.modules()
    order = layers((REPO / "README.md").read_text())
    assert len(order) > 5
    layer, unused = layer_of(order, list(mods))
    assert not unused, f"README Layout names what is no module under lab/: {unused}"
    missing = sorted(set(mods) - set(layer))
    assert not missing, f"modules in no layer of README's Layout section: {missing}"
    bad = upward(order, layer, m.import_sites(mods), mods)
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_known_exceptions_are_still_there():
    m = _metrics()
    edges = {(mod, t) for mod, _line, t, _local in m.import_sites(m.modules())}
    assert not set(KNOWN) - edges, "a KNOWN upward import is gone: delete it from KNOWN"


def test_the_check_finds_an_upward_import():
    readme = "x\n## Layout\n\n1. **low**: `a`,\n   `b`\n2. **high**: `c`\n\n## Next\n3. **no**: `d`\n"
    order = layers(readme)
    assert order == [("low", ["a", "b"]), ("high", ["c"])]
    layer, unused = layer_of(order, ["lab.a", "lab.b.x", "lab.c", "lab.e"])
    assert layer == {"lab.a": 0, "lab.b.x": 0, "lab.c": 1} and unused == []
    mods = {k: REPO / "lab" / f"{k[4:]}.py" for k in layer}
    sites = [("lab.a", 3, "lab.b.x", False), ("lab.b.x", 7, "lab.c", True), ("lab.c", 1, "lab.a", False)]
    assert upward(order, layer, sites, mods) == ["lab/b.x.py:7: lab.b.x (layer 1, low) imports lab.c (layer 2, high)"]


def test_every_function_local_import_says_what_it_defers():
    m = _metrics()
    mods = m.modules()
    bad = []
    for mod, first, last in m.local_imports(mods):
        lines = mods[mod].read_text().splitlines()
        stmt = " ".join(lines[first - 1 : last])
        where = f"{mods[mod].relative_to(REPO)}:{first}"
        # the comment on the import's line, or over the block of import lines it is in
        # (isort's blank line between sections inside it)
        above = first - 2
        while above > 0 and (not lines[above].strip() or lines[above].strip().startswith(("from ", "import "))):
            above -= 1
        found = DEFERRED.search(lines[first - 1]) or DEFERRED.search(lines[above].strip())
        if found is None:
            bad.append(f"{where}: a function-local import without '# deferred: CLI start|optional|heavy (what)'")
            continue
        names = [n for group in re.findall(r"\(([^()]+)\)", found.group(0)) for n in group.split(", ")]
        below = last
        while below < len(lines) and (not lines[below].strip() or lines[below].strip().startswith(("from ", "import "))):
            below += 1
        block = " ".join(x.split("#")[0] for x in lines[above + 1 : below])
        bad += [f"{where}: the reason names {n}, which its imports do not load" for n in names if n.rpartition(".")[2] not in block]
        if not any(n.rpartition(".")[2] in stmt for n in names):
            bad.append(f"{where}: the reason ({', '.join(names)}) names nothing this import loads")
    assert not bad, "\n".join(bad)


def test_the_reason_vocabulary():
    for ok in ("# deferred: CLI start (rich)", "# deferred: optional (libvirt)", "# deferred: heavy (scipy)",
               "# deferred: CLI start (lab.runner, lab.scenario)", "# deferred: CLI start (a); heavy (b)"):  # fmt: skip
        assert DEFERRED.search(ok), ok
    for bad in ("# deferred: slow (rich)", "# deferred: CLI start", "# deferred: CLI start ()", "# lazy"):
        assert not DEFERRED.search(bad), bad
