"""No import cycles among lab's modules, function-local imports included (issue 33 item
7): a cycle hidden in a function-local import still ties the two layers together.  The
graph is bench/code_metrics.py's (static, nothing of lab is run).  There is none: the
last one (expect -> sysfs -> hwloc -> importer -> expect, hwloc borrowing importer's TOML
string helper) went when that helper moved down to lab.topology.spec."""


from _bench import bench_module


def _metrics():
    return bench_module("code_metrics")


def test_no_import_cycle():
    m = _metrics()
    graph, _ = m.imports(m.modules())
    assert m.cycles(graph) == []


def test_the_graph_sees_function_local_imports_and_cycles():
    m = _metrics()
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert m.cycles(graph) == [["a", "b", "c"]]
    g, local = m.imports(m.modules())
    # cli.run's commands import runner inside the function: that edge is in the graph
    assert "lab.runner" in g["lab.cli.run"]
    assert "from .. import runner" not in m.REPO.joinpath("lab/cli/run.py").read_text().split("\ndef ")[0]
    assert local > 50
