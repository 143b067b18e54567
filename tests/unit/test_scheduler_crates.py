"""The scx project's Rust schedulers from crates.io (issue 35): `lab scheduler build
scx_bpfland[@VERSION]` and `--scheduler scx_bpfland[:ARGS]`, with cargo, rustc and clang-16
faked (shell scripts on PATH): the argv and environment cargo gets, the store key and
layout, the cache hit, each error in one line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import scheduler as sm
from lab.cli import main
from lab.errors import UserError
from lab.kernel.artifact import KernelArtifact

# A dynamically linked host binary stands in for what cargo builds (its loader and
# libraries are packed like a real one's).
STAND_IN = shutil.which("true") or "/bin/true"

FAKE_CARGO = r"""#!/bin/sh
# fake cargo: `cargo --version`, or `cargo install ... --root ROOT ... NAME --version V`
[ "$1" = "--version" ] && { echo "cargo 1.95.0 (fake)"; exit 0; }
{ for a in "$@"; do printf '%s\n' "$a"; done; } > "$FAKE_LOG/argv"
env > "$FAKE_LOG/env"
echo x >> "$FAKE_LOG/calls"
root=
prev=
for a in "$@"; do [ "$prev" = "--root" ] && root=$a; prev=$a; done
echo "    Updating crates.io index"
case "$FAKE_MODE" in
  noversion) echo "error: could not find \`scx_bpfland\` in registry \`crates-io\` with version \`=9.9.9\`"; exit 101 ;;
  fail) echo "   Compiling scx_bpfland v1.0.20"; echo "error: failed to run custom build command for \`scx_utils v1.0.26\`";
        echo "  clang: error: unknown target CPU 'v9'"; exit 101 ;;
  nobinary) exit 0 ;;
esac
mkdir -p "$root/bin" && cp "$STAND_IN" "$root/bin/scx_bpfland"
echo "   Installed package \`scx_bpfland v1.0.20\` (executable \`scx_bpfland\`)"
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """cargo, rustc and clang-16 faked on PATH; lab's cache in tmp_path; HOME without
    ~/.cargo.  Returns the folder the fake cargo records its argv, env and calls in."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "fakelog"
    log.mkdir()
    (bin_ / "cargo").write_text(FAKE_CARGO)
    (bin_ / "rustc").write_text('#!/bin/sh\necho "rustc ${FAKE_RUSTC:-1.95.0} (fake)"\n')
    (bin_ / "clang-16").write_text('#!/bin/sh\necho "Debian clang version 16.0.6 (fake)"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("STAND_IN", STAND_IN)
    monkeypatch.delenv("FAKE_MODE", raising=False)
    return log


def _kernel(tmp_path: Path, arch: str = "x86_64") -> KernelArtifact:
    entry = tmp_path / "kernel"
    entry.mkdir(exist_ok=True)
    (entry / "bzImage").write_bytes(b"image")
    (entry / "config").write_text("CONFIG_SCHED_CLASS_EXT=y\n")
    return KernelArtifact("lab-6.12-scx", arch, entry / "bzImage", "6.12.117", None, entry / "config", frozenset(), "a" * 32, {})


# ---- naming one ----------------------------------------------------------------------------------


def test_a_crate_is_a_spec_whose_args_stay_data():
    s = sm.parse_spec("""scx_bpfland:-s 20000 '$(reboot)' ; `id` | x""")
    assert s is not None and (s.name, s.kind, s.version, s.ops) == ("scx_bpfland", "crate", "", "bpfland")
    assert s.args == ("-s", "20000", "$(reboot)", ";", "`id`", "|", "x")
    assert sm.parse_spec(s.text) == s  # what plan.json and the command file keep gives the same words


def test_a_version_is_kept_and_round_trips():
    s = sm.parse_spec("scx_bpfland@1.0.19:-v")
    assert s is not None and (s.name, s.version, s.args, s.text) == ("scx_bpfland", "1.0.19", ("-v",), "scx_bpfland@1.0.19:-v")
    assert sm.parse_spec(s.text) == s


@pytest.mark.parametrize(("text", "said"), [
    ("scx_bpfland@", "'' is not a version of scx_bpfland"),
    ("scx_bpfland@1.x", "'1.x' is not a version of scx_bpfland"),
    ("scx_bpfland@1.0.20;id", "is not a version"),
    ("scx_nope@1.0.20", "unknown scheduler 'scx_nope@1.0.20'"),
    ("scx_simple@1.0.20", "unknown scheduler"),
])  # fmt: skip
def test_bad_crate_names_are_one_line(text, said):
    with pytest.raises(UserError, match=None) as e:
        sm.parse_spec(text)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_the_pinned_crates_build_with_bookworms_clang():
    for name, crate in sm.CRATES.items():
        assert crate.name == name and crate.clang == "clang-16" and crate.version.startswith("1.0.")
        assert sm.ops_match(f"{crate.ops}_{crate.version}_x86_64_unknown_linux_gnu", crate.ops)


# ---- building ------------------------------------------------------------------------------------


def test_cargo_argv_and_env(fake, tmp_path):
    s = sm.build_crate("scx_bpfland", jobs=3)
    argv = (fake / "argv").read_text().splitlines()
    root = argv[argv.index("--root") + 1]
    assert argv == ["install", "--locked", "--root", root, "-j", "3", "scx_bpfland", "--version", "1.0.20"]
    work = Path(root).parent
    assert work.parent == tmp_path / "cache" / "work" and work.name.startswith("crate-scx_bpfland-1.0.20-")
    assert not work.exists()  # the cargo root and target dir are gone once it is stored
    env = dict(line.split("=", 1) for line in (fake / "env").read_text().splitlines() if "=" in line)
    assert env["BPF_CLANG"] == str(tmp_path / "bin" / "clang-16")
    assert env["LIBCLANG_PATH"] == "/usr/lib/llvm-16/lib"
    assert env["CARGO_TARGET_DIR"] == str(work / "target")
    assert env["PATH"].split(":")[0] == str(tmp_path / "bin")  # cargo's own folder first: its rustc
    assert "BPF_BASE_CFLAGS" not in env  # the crate's own flags
    assert s.metadata["build_command"].split()[0] == str(tmp_path / "bin" / "cargo")


def test_store_entry_key_and_metadata(fake, tmp_path):
    s = sm.build_crate("scx_bpfland")
    tools = sm.crate_toolchain(sm.CRATES["scx_bpfland"])
    k = sm.crate_key("scx_bpfland", "1.0.20", tools, "x86_64")
    assert k == {"layout": sm.LAYOUT, "name": "scx_bpfland", "origin": "crates.io",
                 "crate": {"name": "scx_bpfland", "version": "1.0.20"},
                 "toolchain": {"clang": "Debian clang version 16.0.6 (fake)", "rustc": "rustc 1.95.0 (fake)"},
                 "arch": "x86_64"}  # fmt: skip
    entry = tmp_path / "cache" / "schedulers" / sm.entry_id(k)
    assert s.id == sm.entry_id(k) and s.binary == entry / "scx_bpfland"
    assert s.binary.read_bytes() == Path(STAND_IN).read_bytes()
    assert sorted(p.name for p in entry.iterdir()) == ["build.log", "metadata.json", "root", "scx_bpfland"]
    meta = json.loads((entry / "metadata.json").read_text())
    assert meta["origin"] == "crates.io" and meta["crate"] == {"name": "scx_bpfland", "version": "1.0.20", "pinned": "1.0.20"}
    assert meta["ops"] == "bpfland" and meta["version"] == "scx_bpfland 1.0.20 (crates.io)" and meta["kernel"] == {}
    assert meta["toolchain"] == {"cargo": "cargo 1.95.0 (fake)", "rustc": "rustc 1.95.0 (fake)", "clang": "Debian clang version 16.0.6 (fake)"}
    assert isinstance(meta["timings"]["build_s"], float) and meta["static"] is False and meta["libraries"]
    for lib in meta["libraries"]:  # the loader and libraries at their guest paths
        assert (entry / sm.LIBS_DIR / lib.lstrip("/")).exists() or (entry / sm.LIBS_DIR / lib.lstrip("/")).is_symlink()
    assert "Installed package" in (entry / "build.log").read_text()
    assert not [p for p in (tmp_path / "cache" / "schedulers").iterdir() if p.name.startswith(".")]  # no staging left


def test_second_build_is_a_cache_hit_and_force_rebuilds(fake):
    a = sm.build_crate("scx_bpfland")
    b = sm.build_crate("scx_bpfland", "1.0.20")
    assert a.id == b.id and (fake / "calls").read_text().count("x") == 1
    assert sm.find_crate("scx_bpfland") == a
    sm.build_crate("scx_bpfland", force=True)
    assert (fake / "calls").read_text().count("x") == 2


def test_the_key_follows_version_and_toolchain(fake, monkeypatch):
    a = sm.build_crate("scx_bpfland")
    b = sm.build_crate("scx_bpfland", "1.0.19")
    monkeypatch.setenv("FAKE_RUSTC", "1.96.0")
    c = sm.build_crate("scx_bpfland")
    assert len({a.id, b.id, c.id}) == 3
    assert (fake / "argv").read_text().splitlines()[-1] == "1.0.20"
    assert sm.find_crate("scx_bpfland", "1.0.19") is None  # built with the other rustc


def test_a_version_crates_io_lacks_is_one_line(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_MODE", "noversion")
    with pytest.raises(UserError) as e:
        sm.build_crate("scx_bpfland", "9.9.9")
    assert str(e.value) == ("scheduler scx_bpfland@9.9.9: could not find `scx_bpfland` in registry `crates-io` "
                            "with version `=9.9.9` (lab pins 1.0.20)")  # fmt: skip
    assert not list((tmp_path / "cache" / "schedulers").iterdir())


def test_a_failed_build_names_the_error_and_keeps_the_log(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(sm.SchedulerBuildError) as e:
        sm.build_crate("scx_bpfland")
    log = tmp_path / "cache" / "work" / "build-scx_bpfland-1.0.20.log"
    assert str(e.value).startswith("scheduler scx_bpfland 1.0.20 failed to build (exit 101) at ")
    assert str(log) in str(e.value) and "\n" not in str(e.value) and e.value.exit_code == 2
    assert "unknown target CPU 'v9'" in e.value.detail and "unknown target CPU 'v9'" in log.read_text()
    assert not list((tmp_path / "cache" / "schedulers").iterdir())
    assert [p.name for p in (tmp_path / "cache" / "work").iterdir()] == [log.name]  # the work dir is gone


def test_cargo_leaving_no_binary_is_a_build_error(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "nobinary")
    with pytest.raises(sm.SchedulerBuildError, match="not an x86_64 binary"):
        sm.build_crate("scx_bpfland")


def test_missing_cargo_or_clang_is_one_line(fake, tmp_path, monkeypatch):
    (tmp_path / "bin" / "cargo").unlink()
    with pytest.raises(UserError, match=r"^cargo not found: building scx_bpfland from crates.io needs Rust's cargo and rustc"):
        sm.build_crate("scx_bpfland")
    assert sm.find_crate("scx_bpfland") is None
    home = tmp_path / "home" / ".cargo" / "bin"  # rustup's place is found off PATH
    home.mkdir(parents=True)
    shutil.copy2(tmp_path / "bin" / "rustc", home / "rustc")
    (home / "cargo").write_text(FAKE_CARGO)
    (home / "cargo").chmod(0o755)
    (tmp_path / "bin" / "rustc").unlink()
    assert sm.build_crate("scx_bpfland").binary.is_file()
    monkeypatch.setitem(sm.CRATES, "scx_bpfland", sm.Crate("scx_bpfland", "1.0.20", "bpfland", "clang-nope"))
    with pytest.raises(UserError, match="^clang-nope not found: scx_bpfland's BPF programs are compiled with it"):
        sm.build_crate("scx_bpfland", "1.0.19")


def test_unknown_crate_and_bad_version(fake):
    with pytest.raises(UserError, match="unknown scheduler crate 'scx_nope'"):
        sm.build_crate("scx_nope")
    with pytest.raises(UserError, match="'1.0' is not a version"):
        sm.build_crate("scx_bpfland", "1.0")
    assert not (fake / "calls").exists()


# ---- resolving --scheduler -----------------------------------------------------------------------


def test_resolve_builds_when_missing_and_reuses_after(fake, tmp_path):
    k = _kernel(tmp_path)
    spec = sm.parse_spec("scx_bpfland:-k")
    assert spec is not None
    assert sm.find_built(spec, k) is None
    with pytest.raises(UserError, match=r"^scheduler scx_bpfland is not built; run: lab scheduler build scx_bpfland$"):
        sm.resolve(spec, k, build_it=False)
    s = sm.resolve(spec, k)
    assert s.name == "scx_bpfland" and s.ops == "bpfland" and sm.find_built(spec, k) == s
    assert sm.resolve(spec, k) == s and (fake / "calls").read_text().count("x") == 1
    rec = s.record(spec.args)
    assert rec["args"] == ["-k"] and rec["version"] == "scx_bpfland 1.0.20 (crates.io)" and rec["ops"] == "bpfland"


def test_resolve_refuses_another_arch(fake, tmp_path):
    spec = sm.parse_spec("scx_bpfland")
    assert spec is not None
    with pytest.raises(UserError, match="lab builds crates for the host's arch"):
        sm.resolve(spec, _kernel(tmp_path, "arm64"))


# ---- the CLI -------------------------------------------------------------------------------------


def test_cli_build_list_show(fake):
    r = CliRunner().invoke(main, ["scheduler", "build", "scx_bpfland@1.0.20", "--kernel", "nope-not-used"])
    assert r.exit_code == 0, r.output
    sid = r.stdout.strip()
    assert len(sid) == 32 and "scx_bpfland 1.0.20 (crates.io)" in r.stderr
    r = CliRunner().invoke(main, ["scheduler", "list"])
    assert r.exit_code == 0, r.output
    assert "scx_bpfland  ops bpfland  pinned 1.0.20, BPF by clang-16; built: 1.0.20" in r.stdout
    assert f"scx_bpfland@{sid[:8]}" in r.stdout and "crates.io 1.0.20 (built in" in r.stdout
    r = CliRunner().invoke(main, ["scheduler", "show", sid])
    meta = json.loads(r.stdout)["metadata"]
    assert meta["origin"] == "crates.io" and meta["crate"]["version"] == "1.0.20" and "build_s" in meta["timings"]


@pytest.mark.parametrize(("mode", "argv", "said"), [
    ("noversion", ["scheduler", "build", "scx_bpfland@9.9.9"], "lab: error: scheduler scx_bpfland@9.9.9: could not find"),
    ("fail", ["scheduler", "build", "scx_bpfland"], "lab: error: scheduler scx_bpfland 1.0.20 failed to build (exit 101)"),
    ("", ["scheduler", "build", "scx_bpfland@1..0"], "lab: error: lab scheduler build scx_bpfland@1..0: '1..0' is not a version"),
])  # fmt: skip
def test_cli_errors_are_one_line_exit_2(fake, monkeypatch, mode, argv, said):
    monkeypatch.setenv("FAKE_MODE", mode)
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.stdout == "", r.output
    # One error line, after the build step's progress line when cargo ran; a failed
    # build's compiler output follows it (as for tools/sched_ext's schedulers).
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("lab: error:")]
    assert len(errors) == 1 and errors[0].startswith(said), r.stderr
    before = r.stderr.split("lab: error:")[0].splitlines()
    assert all(ln.startswith("[") and "build: scheduler scx_bpfland" in ln for ln in before), r.stderr
    if mode == "fail":
        assert r.stderr.rstrip().endswith("clang: error: unknown target CPU 'v9'"), r.stderr
    elif mode == "noversion":
        assert r.stderr.endswith("(lab pins 1.0.20)\n"), r.stderr


def test_cli_without_cargo_is_one_line(fake, tmp_path):
    os.unlink(tmp_path / "bin" / "cargo")
    r = CliRunner().invoke(main, ["scheduler", "build", "scx_bpfland"])
    assert r.exit_code == 2 and r.stderr.startswith("lab: error: cargo not found") and r.stderr.count("\n") == 1
