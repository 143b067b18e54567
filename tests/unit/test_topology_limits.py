"""Specs that are too big, mistyped or not files: one line naming file and field (issue 13)."""

from __future__ import annotations

import os
import threading

import pytest
from _bounds import one_line, within
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import topology
from lab.errors import UserError
from lab.limits import MAX_CPUS, MAX_FILE_BYTES, MAX_MEMORY_MB, MAX_NODES
from lab.topology import SpecError

FUZZ = settings(max_examples=300, deadline=5000)  # ms per example

HEAD = 'name = "x"\narch = "x86_64"\n[cpu]\nvendor = "intel"\n'


def shape(**kw) -> str:
    t = {"sockets": 1, "cores_per_cluster": 2, **kw}
    return HEAD + "[topology]\n" + "".join(f"{k} = {v}\n" for k, v in t.items())


def groups(nodes='{ 0 = "0-3" }', sockets='["0-3"]', llcs='["0-3"]', cores='["0-1", "2-3"]') -> str:
    return HEAD + f"[groups]\nnodes = {nodes}\nsockets = {sockets}\nllcs = {llcs}\ncores = {cores}\n"


def refused(text: str, field: str, words: str, seconds: float = 1.0) -> str:
    with within(seconds), pytest.raises(SpecError) as e:
        topology.loads(text, where="x.toml")
    msg = one_line(str(e.value))
    assert msg.startswith(f"x.toml: {field}: ") and words in msg, msg
    return msg


@pytest.mark.parametrize(
    "text, field, words",
    [
        # sizes: before, MemoryError after seconds of building a list of 10**8 CPUs
        (shape(llcs_per_node=100_000_000), "topology.llcs_per_node", f"at most {MAX_CPUS}"),
        (shape(sockets=64, llcs_per_node=64, cores_per_cluster=64), "topology", f"more than the {MAX_CPUS}"),
        (shape(sockets=2, nodes_per_socket=1024), "topology.nodes_per_socket", f"{MAX_NODES} Linux supports"),
        (groups(nodes='{ 0 = "0-999999999" }'), "groups.nodes.0", "ids go up to"),
        (groups(llcs='["0-4095", "0-4095"]'), "groups.llcs", f"more than the {MAX_CPUS}"),
        (shape(numbering='"explicit"', cpus="[0, 99999999999999]"), "topology.cpus[1]", "at most 4095"),
        (shape() + f"[numa]\nmemory_mb = {10**12}\n", "numa.memory_mb", "1 TiB"),
        (shape(sockets=2) + '[numa]\ndistances = [[10, 20], [20, 10]]\nmemory_mb = 600000\n', "numa.memory_mb", "in all nodes"),
        # types: TOML booleans, floats and strings are not numbers here
        (groups(cores="[[false, true], [2, 3]]"), "groups.cores[0][0]", "whole number, not false"),
        (groups(sockets="[[-1, 0, 1, 2, 3]]"), "groups.sockets[0][0]", "at least 0"),
        (groups(sockets="[[0, 1, 2, 3.0]]"), "groups.sockets[0][3]", "whole number"),
        (shape(sockets="true"), "topology.sockets", "whole number, not true"),
        (shape(sockets="inf"), "topology.sockets", "whole number, not inf"),
        (shape(sockets="nan"), "topology.sockets", "whole number, not nan"),
        (shape(sockets='"2"'), "topology.sockets", "whole number"),
        (shape(sockets=0), "topology.sockets", "at least 1"),
        (shape(sockets=-0), "topology.sockets", "at least 1"),
        (shape() + "[numa]\nmemory_mb = inf\n", "numa.memory_mb", "whole number"),
        (shape() + "[numa]\nmemory_mb = -0.0\n", "numa.memory_mb", "whole number"),
        (shape() + "[numa]\nmemory_mb = [true]\n", "numa.memory_mb", "at least 64"),
        (shape().replace('"intel"', '"intel"\nfamily = 99999999999'), "cpu.family", "at most 270 (0x10e"),
        (shape().replace('"intel"', '"intel"\nfamily = 6.0'), "cpu.family", "whole number"),
        (shape().replace('"x86_64"', '"arm64"').replace('"intel"', '"arm"\ngic = 3.0'), "cpu.gic", "2 or 3"),
        (shape().replace('"x86_64"', '"arm64"').replace('"intel"', '"arm"\ngic = true'), "cpu.gic", "2 or 3"),
        # node ids: int() would take all of these
        (groups(nodes="{ 100000000000000000000 = '0-3' }"), "groups.nodes.'100000000000000000000'", "go up to"),
        (groups(nodes='{ "-0" = "0-3" }'), "groups.nodes.'-0'", "whole numbers"),
        (groups(nodes='{ "inf" = "0-3" }'), "groups.nodes.'inf'", "whole numbers"),
        (groups(nodes='{ " 1" = "0-3" }'), "groups.nodes.' 1'", "whole numbers"),
        (groups(nodes='{ "1_0" = "0-3" }'), "groups.nodes.'1_0'", "whole numbers"),
        (groups(nodes='{ "01" = "0-3" }'), "groups.nodes.'01'", "whole numbers"),
        (groups(nodes='{ "\u0663" = "0-3" }'), "groups.nodes.'\u0663'", "whole numbers"),
        (groups(nodes='{ "1024" = "0-3" }'), "groups.nodes.'1024'", "go up to 1023"),
        # cpulists: before, 'invalid literal for int() with base 10'
        (groups(nodes='{ 0 = "0-" }'), "groups.nodes.0", "no end"),
        (groups(nodes='{ 0 = "-1" }'), "groups.nodes.0", "not negative"),
        (groups(nodes='{ 0 = "0-3:0" }'), "groups.nodes.0", "stride 0"),
        (groups(nodes='{ 0 = "1_0" }'), "groups.nodes.0", "not a CPU number"),
        # strings that would break a one-line message
        (HEAD.replace('"x"', '"a\\nb"') + "[topology]\nsockets = 1\ncores_per_cluster = 2\n", "name", "one line"),
        (shape().replace('"intel"', '"intel"\nmodel = "x\\u0000"'), "cpu.model", "one line"),
        (shape(numbering="1"), "topology.numbering", "must be a string"),
        (groups() + "numbering = 1\n", "groups.numbering", "must be one of"),
    ],
)
def test_bad_spec_values(text, field, words):
    refused(text, field, words)


def test_bad_toml_is_one_line():
    for text, words in (
        (HEAD + "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        (shape(sockets="9" * 5000), "thousands of digits"),
        (HEAD + "[topology\n", "TOML syntax"),
    ):
        with within(2.0), pytest.raises(SpecError) as e:
            topology.loads(text, where="x.toml")
        assert one_line(str(e.value)).startswith("x.toml: TOML syntax: ") and words in str(e.value)


def test_unknown_key_of_any_shape_is_one_line():
    msg = refused(HEAD + '"a\\nb" = 1\n[topology]\nsockets = 1\ncores_per_cluster = 2\n', "cpu.'a\\nb'", "unknown key")
    assert "did you mean" not in msg
    long = refused(shape() + "x" * 10_000 + " = 1\n", "topology.'" + "x" * 36 + "...", "unknown key")
    assert len(long) < 120


def test_the_limits_themselves_load():
    t = topology.loads(shape(sockets=2, llcs_per_node=8, cores_per_cluster=128, threads_per_core=2)
                       + "[numa]\ndistances = [[10, 32], [32, 10]]\n", where="x.toml")
    assert t.n_cpus == MAX_CPUS
    one = topology.loads(shape() + f"[numa]\nmemory_mb = {MAX_MEMORY_MB}\n", where="x.toml")
    assert one.memory_mb == (MAX_MEMORY_MB,)
    g = topology.loads(groups(nodes='{ 1023 = "4092-4095" }', sockets='["4092-4095"]', llcs='[[4092, 4093, 4094, 4095]]',
                              cores='["4092-4093", "4094-4095"]'), where="x.toml")
    assert g.node_ids == (1023,) and g.cpu_ids == (4092, 4093, 4094, 4095)


# ---- files that are not specs ------------------------------------------------------------


def test_fifo_is_refused_without_waiting(tmp_path):
    # Before: `lab topo show x.toml` on a FIFO waited forever for a writer.
    fifo = tmp_path / "x.toml"
    os.mkfifo(fifo)
    out: list[BaseException | None] = []

    def load() -> None:
        try:
            topology.load(fifo)
            out.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            out.append(e)

    th = threading.Thread(target=load, daemon=True)  # a hang must not hang pytest too
    th.start()
    th.join(5)
    assert out, "topology.load() blocked on a FIFO"
    assert isinstance(out[0], UserError) and "a FIFO, not a regular file" in one_line(str(out[0]))


def test_directory_device_and_oversized_specs(tmp_path):
    d = tmp_path / "d.toml"
    d.mkdir()
    with pytest.raises(UserError, match="a directory, not a regular file"):
        topology.load(d)
    if os.path.exists("/dev/zero"):
        link = tmp_path / "zero.toml"
        link.symlink_to("/dev/zero")
        with within(1.0), pytest.raises(UserError, match="a character device"):
            topology.load(link)
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of zeros that nothing should read
    with within(1.0), pytest.raises(UserError) as e:
        topology.load(big)
    assert f"larger than {MAX_FILE_BYTES >> 20} MiB" in one_line(str(e.value))


def test_symlinked_spec_still_loads(tmp_path):
    # A spec the user names may be a link (a catalog kept elsewhere): followed.
    link = tmp_path / "mine.toml"
    link.symlink_to(topology.resolve("zen3-2s-mini").resolve())
    assert topology.load(link).n_cpus == 32


# ---- fuzz: random TOML values in every field -----------------------------------------------

toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["0-3", "0-999999999", "0-", "-1", "4-7", "0,2", "1_0", "linear", "explicit", "intel", "amd"]),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=12,
)

BASE_SHAPE = {
    "name": "x",
    "arch": "x86_64",
    "cpu": {"vendor": "amd", "family": 0x19},
    "topology": {"sockets": 2, "llcs_per_node": 2, "cores_per_cluster": 2, "threads_per_core": 2},
    "numa": {"distances": [[10, 32], [32, 10]], "memory_mb": 512},
}
BASE_GROUPS = {
    "name": "x",
    "arch": "arm64",
    "cpu": {"vendor": "hisilicon"},
    "groups": {
        "nodes": {"0": "0-3", "1": "4-7"},
        "sockets": ["0-7"],
        "llcs": ["0-3", "4-7"],
        "clusters": ["0-1", "2-3", "4-5", "6-7"],
        "cores": ["0", "1", "2", "3", "4", "5", "6", "7"],
    },
    "numa": {"distances": [[10, 20], [20, 10]], "memory_mb": [256, 256]},
}
FIELDS = [
    (base, table, key)
    for base in (BASE_SHAPE, BASE_GROUPS)
    for table in ("", "cpu", "topology", "groups", "numa", "provenance")
    for key in {
        "": ["name", "arch", "description", "cpu", "numa"],
        "cpu": ["vendor", "model", "family", "gic"],
        "topology": ["sockets", "nodes_per_socket", "sockets_per_node", "llcs_per_node",
                     "clusters_per_llc", "cores_per_cluster", "threads_per_core", "numbering", "cpus"],
        "groups": ["nodes", "sockets", "llcs", "clusters", "cores", "numbering"],
        "numa": ["distances", "memory_mb"],
        "provenance": ["machine", "sources", "notes"],
    }[table]
    if table not in ("topology", "groups") or table in base
]


def _load_or_spec_error(data) -> None:
    try:
        t = topology.from_dict(data, where="x.toml")
    except UserError as e:
        assert one_line(str(e)).startswith("x.toml: "), str(e)
        return
    assert 0 < t.n_cpus <= MAX_CPUS and all(0 <= c < MAX_CPUS for c in t.cpu_ids)
    assert all(0 <= n < MAX_NODES for n in t.node_ids)
    assert sum(t.memory_mb) <= MAX_MEMORY_MB
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in t.memory_mb)


@FUZZ
@given(st.data())
def test_fuzz_one_field(data):
    base, table, key = data.draw(st.sampled_from(FIELDS))
    spec = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    value = data.draw(toml_values)
    if table:
        spec.setdefault(table, {})[key] = value
    else:
        spec[key] = value
    _load_or_spec_error(spec)


@FUZZ
@given(st.data())
def test_fuzz_cpulists_and_node_ids(data):
    spec = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE_GROUPS.items()}
    g = spec["groups"] = dict(BASE_GROUPS["groups"])
    cpulists = st.one_of(
        st.text(alphabet="0123456789-,: ", max_size=12),
        st.lists(st.one_of(st.integers(-2, 5000), st.booleans(), st.floats()), max_size=6),
    )
    key = data.draw(st.sampled_from(["nodes", "sockets", "llcs", "clusters", "cores"]))
    if key == "nodes":
        g["nodes"] = data.draw(st.dictionaries(st.text(alphabet="0123456789-_ +e", max_size=6), cpulists, max_size=3))
    else:
        g[key] = data.draw(st.lists(cpulists, max_size=6))
    _load_or_spec_error(spec)


@FUZZ
@given(st.text(alphabet='[]{}=,."0123456789-abcdefinstu_ \n#', max_size=200))
def test_fuzz_toml_text(text):
    try:
        topology.loads(HEAD + "[topology]\nsockets = 1\ncores_per_cluster = 2\n" + text, where="x.toml")
    except UserError as e:
        assert one_line(str(e)).startswith("x.toml: ")


def test_cli_topo_show_on_a_fifo_is_one_line(tmp_path):
    from click.testing import CliRunner

    from lab.cli import main

    fifo = tmp_path / "x.toml"
    os.mkfifo(fifo)
    out: list = []
    th = threading.Thread(target=lambda: out.append(CliRunner().invoke(main, ["topo", "show", str(fifo)])), daemon=True)
    th.start()
    th.join(10)
    assert out, "lab topo show blocked on a FIFO"
    r = out[0]
    assert r.exit_code == 2, r.output
    assert one_line(r.output.strip()) == f"lab: error: {fifo}: a FIFO, not a regular file"
