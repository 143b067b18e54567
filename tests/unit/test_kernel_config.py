"""Fragment parsing and merging, and the kconfiglib check on a real Kconfig tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.errors import UserError
from lab.kernel import config, recipe

FAKE = Path(__file__).parent.parent / "fixtures" / "fakelinux"


@pytest.fixture(scope="module")
def linux() -> Path:
    """The real 6.1 Kconfig tree: an extracted copy, else lab's pristine unpack of
    Debian's linux-source-6.1 (made once in the cache, ~10 s)."""
    extracted = Path("/tmp/linux-source-6.1")
    if (extracted / "Kconfig").is_file():
        return extracted
    from lab.kernel import source

    if not source.DEBIAN_TARBALLS["6.1"].is_file():
        pytest.skip("no Linux 6.1 Kconfig tree: apt-get install linux-source-6.1")
    return source.resolve("debian:6.1").tree


def frag(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_parse_fragment(tmp_path):
    f = frag(
        tmp_path,
        "a.config",
        '# comment\n\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C="s"\nCONFIG_D=12\n',
    )
    reqs = config.parse_fragment(f)
    assert [(r.name, r.value) for r in reqs] == [("A", "y"), ("B", "n"), ("C", '"s"'), ("D", "12")]
    assert reqs[0].where == f"{f}:3"
    assert reqs[1].line() == "# CONFIG_B is not set"


@pytest.mark.parametrize("bad", ["CONFIG_A y", "SMP=y", "CONFIG_A=", "  NUMA"])
def test_bad_fragment_line_names_file_and_line(tmp_path, bad):
    f = frag(tmp_path, "bad.config", f"CONFIG_OK=y\n\n{bad}\n")
    with pytest.raises(UserError, match=rf"{f}:3: "):
        config.parse_fragment(f)


def test_merge_later_wins_and_keeps_origin(tmp_path):
    a = frag(tmp_path, "a.config", "CONFIG_A=y\nCONFIG_B=y\n")
    b = frag(tmp_path, "b.config", "# CONFIG_A is not set\n")
    m = config.merge([a, b])
    assert m["A"].value == "n" and m["A"].where == f"{b}:1"
    assert m["B"].where == f"{a}:2"


def test_write_merged_replaces_base_lines(tmp_path):
    base = frag(tmp_path, "base", "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=1\n")
    m = config.merge([frag(tmp_path, "f", "CONFIG_B=y\n# CONFIG_A is not set\n")])
    out = tmp_path / "out"
    config.write_merged(base, m, out)
    assert config.read_config(out) == {"A": "n", "B": "y", "C": "1"}


def _kconf(tree: Path, cfg: Path, arch: str = "x86_64"):
    env = config.kconfig_env(tree, arch, "gcc", "ld", "6.1.0")
    return config.load_kconfig(tree, env, cfg)


def test_check_on_fixture_tree_names_unmet_dependency(tmp_path):
    cfg = frag(
        tmp_path, ".config", "# CONFIG_SMP is not set\n# CONFIG_NUMA is not set\nCONFIG_NR_CPUS=8\n"
    )
    req = config.merge(
        [frag(tmp_path, "f.config", "CONFIG_NUMA=y\nCONFIG_NR_CPUS=8\nCONFIG_NOPE=y\n")]
    )
    probs = {p.request.name: p for p in config.check(_kconf(FAKE, cfg), req)}
    assert set(probs) == {"NUMA", "NOPE"}
    assert "depends on SMP" in probs["NUMA"].reason and "SMP=n" in probs["NUMA"].reason
    assert f"{tmp_path}/f.config:1" in str(probs["NUMA"])
    assert "no such symbol" in probs["NOPE"].reason


def test_check_on_real_linux_6_1_tree(tmp_path, linux):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed for Kconfig's $(cc-option) macros")
    # A config with SMP off: SCHED_MC and NUMA cannot stick, and kconfiglib says why.
    cfg = frag(tmp_path, ".config", "CONFIG_64BIT=y\n# CONFIG_SMP is not set\n")
    kconf = _kconf(linux, cfg)
    kconf.write_config(str(cfg))  # what olddefconfig would produce
    kconf = _kconf(linux, cfg)
    req = config.merge(
        [
            frag(
                tmp_path,
                "want.config",
                "CONFIG_SCHED_MC=y\nCONFIG_64BIT=y\nCONFIG_NR_CPUS=256\n# CONFIG_SMP is not set\n",
            )
        ]
    )
    probs = {p.request.name: p for p in config.check(kconf, req)}
    assert "SCHED_MC" in probs
    assert "SMP" in probs["SCHED_MC"].reason and "unmet dependency" in probs["SCHED_MC"].reason
    assert "64BIT" not in probs and "SMP" not in probs


# Fragments only recipes of a later line use, and that line (sched_ext is in 6.12, not 6.1).
LATER_LINES = {"sched-ext.config": "6.12"}


def test_later_line_fragments_name_real_symbols_of_their_line():
    """Each such fragment against its line's Kconfig tree, when lab has unpacked it (a
    6.12 build or `lab kernel config lab-6.12`, which `scripts/setup.sh --test` runs, so
    CI never skips this); unpacking it here would take about a minute."""
    from lab import paths

    for name, line in LATER_LINES.items():
        trees = sorted(paths.cache_dir().glob(f"sources/debian-linux-source-{line}-*/tree"))
        if not trees or not (trees[-1] / "Kconfig").is_file():
            pytest.skip(f"linux-source-{line} is not unpacked in lab's cache (lab kernel config lab-{line}; scripts/setup.sh --test does)")
        tree = trees[-1]
        kconf = config.load_kconfig(tree, config.kconfig_env(tree, "x86_64", "gcc", "ld", f"{line}.0"))
        for r in config.parse_fragment(paths.KERNELS / "fragments" / name):
            assert r.name in kconf.syms and kconf.syms[r.name].nodes, f"{r.where}: CONFIG_{r.name}"
        assert recipe_uses(name) and all(recipe.load(n).source == f"debian:{line}" for n in recipe_uses(name))


def recipe_uses(fragment: str) -> list[str]:
    return [n for n in recipe.names() if any(f.name == fragment for f in recipe.load(n).fragments)]


def test_lab_fragments_parse_and_name_real_symbols(linux):
    from lab import paths

    kconf = config.load_kconfig(linux, config.kconfig_env(linux, "x86_64", "gcc", "ld", "6.1.0"))
    frags = sorted((paths.KERNELS / "fragments").glob("*.config"))
    assert frags
    for f in frags:
        if f.name in LATER_LINES:
            continue  # symbols 6.1 does not have: checked against their own line below
        for r in config.parse_fragment(f):
            arch_only = f.name.endswith("-arm64.config")
            if not arch_only:
                assert r.name in kconf.syms and kconf.syms[r.name].nodes, (
                    f"{r.where}: CONFIG_{r.name}"
                )
