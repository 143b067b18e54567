"""A user's own sched_ext scheduler (issue 35 item 2c): --scheduler PATH[:ARGS] to a
source directory in tools/sched_ext's layout or to a prebuilt binary (static, or dynamic
with its loader and libraries packed); what is read from it (its name, its ops name),
its store key, and the one-line refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_scheduler import FAKE, TOOLS, _agent_part, _busybox, _kernel  # tests/unit is on sys.path

from lab import scheduler as sm
from lab.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
LLCNODE = ROOT / "tests" / "fixtures" / "schedulers" / "scx_llcnode"


def elf(machine: int = 0x3E, *, interp: bool = False, tail: bytes = b"") -> bytes:
    """A 64-bit little-endian ELF header and one program header (PT_INTERP if *interp*,
    else PT_LOAD), then *tail*."""
    h = bytearray(b"\x7fELF\x02\x01\x01" + bytes(57))
    h[18:20] = machine.to_bytes(2, "little")
    h[32:40] = (64).to_bytes(8, "little")  # e_phoff
    h[54:56] = (56).to_bytes(2, "little")  # e_phentsize
    h[56:58] = (1).to_bytes(2, "little")  # e_phnum
    ph = bytearray(56)
    ph[0:4] = (3 if interp else 1).to_bytes(4, "little")
    return bytes(h + ph) + tail


def source_dir(tmp_path: Path, name: str = "scx_mine", ops: str = "mine") -> Path:
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    (d / f"{name}.bpf.c").write_text(f'SCX_OPS_DEFINE({name}_ops,\n\t.enqueue = (void *)x,\n\t.name = "{ops}");\n')
    (d / f"{name}.c").write_text(f'#include "{name}.bpf.skel.h"\nint main(void) {{ return 0; }}\n')
    return d


# ---- parsing a PATH ---------------------------------------------------------------------------------


def test_a_source_directory_is_named_by_its_files_and_keeps_its_arguments(tmp_path):
    d = source_dir(tmp_path)
    s = sm.parse_spec(f"{d}:-v 'a b'")
    assert s is not None
    assert (s.name, s.kind, s.path, s.ops, s.args) == ("scx_mine", "source", str(d), "mine", ("-v", "a b"))
    assert s.text == f"{d}:-v 'a b'" and sm.parse_spec(s.text) == s  # plan.json's text gives it back


def test_a_relative_path_is_made_absolute(tmp_path, monkeypatch):
    source_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    s = sm.parse_spec("./src")
    assert s is not None and s.path == str(tmp_path / "src") and s.text == str(tmp_path / "src")


def test_the_fixtures_ops_name_is_read_from_its_source():
    s = sm.parse_spec(str(LLCNODE))
    assert s is not None and (s.name, s.ops, s.kind) == ("scx_llcnode", "llcnode", "source")


@pytest.mark.parametrize(
    "text, ops",
    [
        ('SCX_OPS_DEFINE(a_ops, .init = (void *)i, .name = "a");', "a"),
        ('struct x y = { .name = "other" };\nSCX_OPS_DEFINE(a_ops,\n  .name   =  "b");', "b"),
        ('struct sched_ext_ops o SEC(".struct_ops.link") = { .name = "c" };', "c"),
        ("SCX_OPS_DEFINE(a_ops, .init = (void *)i);", ""),
    ],
)
def test_ops_name_from_source(text, ops):
    assert sm.source_ops(text) == ops


def test_ops_name_from_a_binary_s_strings():
    assert sm.binary_ops("scx_mine", b"xx\0mine\0yy") == "mine"
    assert sm.binary_ops("scx_mine", b"xx mine yy") == ""  # not a string of its own
    assert sm.binary_ops("mysched", b"\0mysched\0") == ""  # no scx_ convention to go by


def _refused(text: str) -> str:
    with pytest.raises(UserError) as e:
        sm.parse_spec(text)
    msg = str(e.value)
    assert "\n" not in msg and text.partition(":")[0] in msg
    return msg


def test_bad_paths_are_refused_in_one_line(tmp_path):
    assert "no such file or directory" in _refused(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    assert "holds no NAME.bpf.c with its NAME.c" in _refused(str(tmp_path / "empty"))
    half = tmp_path / "half"
    half.mkdir()
    (half / "scx_a.bpf.c").write_text("")
    assert "scx_a.bpf.c without the matching .c" in _refused(str(half))
    two = source_dir(tmp_path)
    (two / "scx_b.bpf.c").write_text("")
    (two / "scx_b.c").write_text("")
    assert "2 schedulers (scx_b, scx_mine)" in _refused(str(two))
    (tmp_path / "text").write_text("#!/bin/sh\n")
    assert "neither a source directory nor an ELF binary" in _refused(str(tmp_path / "text") + ":-v")
    (tmp_path / "dyn").write_bytes(elf(interp=True))  # its program interpreter: an empty name
    assert "dynamically linked binary whose program interpreter '' this host does not have" in _refused(str(tmp_path / "dyn"))
    (tmp_path / "dynarm").write_bytes(elf(0xB7, interp=True))
    assert "dynamically linked binary for another arch" in _refused(str(tmp_path / "dynarm"))


def test_a_copy_named_like_the_trees_own_is_refused(tmp_path):
    d = source_dir(tmp_path, "scx_simple", "simple")
    assert "the kernel tree's own scheduler" in _refused(str(d))


def test_elf_static_reads_the_program_headers():
    assert sm.elf_static(elf())
    assert not sm.elf_static(elf(interp=True))
    assert not sm.elf_static(b"\x7fELF")
    assert not sm.elf_static(Path("/bin/true").read_bytes())  # Debian's is dynamically linked


# ---- the store key ----------------------------------------------------------------------------------


def test_key_follows_the_files_content_not_their_timestamps(tmp_path):
    k = _kernel(tmp_path)
    d = source_dir(tmp_path)
    spec = sm.user_spec(str(d))
    base = sm.entry_id(sm.key(spec.name, k, TOOLS, spec))
    assert base != sm.entry_id(sm.key(spec.name, k, TOOLS))  # a tree scheduler of that name would differ
    (d / "scx_mine.c").touch()
    assert sm.entry_id(sm.key(spec.name, k, TOOLS, spec)) == base  # unchanged: no rebuild
    (d / "scx_mine.c").write_text("int main(void) { return 1; }\n")
    assert sm.entry_id(sm.key(spec.name, k, TOOLS, spec)) != base  # an edit rebuilds
    assert "user" not in sm.key("scx_simple", k, TOOLS)  # the tree's keys (and store ids) are as before


def test_make_builds_a_users_scheduler_as_the_makefiles_only_target(tmp_path):
    argv = sm.make_argv(tmp_path / "src", tmp_path / "obj", "scx_mine", tmp_path / "btf", 2, user=True)
    assert argv[-2:] == ["c-sched-targets=scx_mine", "scx_mine"]
    assert not any(a.startswith("c-sched-targets") for a in sm.make_argv(tmp_path, tmp_path, "scx_simple", tmp_path, 2))


# ---- a prebuilt binary ------------------------------------------------------------------------------


def test_a_prebuilt_binary_is_stored_by_its_content(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    b = tmp_path / "scx_mine"
    b.write_bytes(elf(tail=b"\0mine\0"))
    spec = sm.parse_spec(f"{b}:-x")
    assert spec is not None and (spec.kind, spec.ops) == ("binary", "mine")
    k = _kernel(tmp_path)
    s = sm.resolve(spec, k, build_it=False)  # nothing to build: stored at once
    assert s.name == "scx_mine" and s.ops == "mine" and s.binary.read_bytes() == b.read_bytes()
    assert s.metadata["user"] == {"kind": "binary", "path": str(b), "ops_known": True}
    assert sm.find_built(spec, k) == s and sm.resolve(spec, k) == s
    assert sm.guest_config(s)["LAB_SCHED_OPS"] == "mine"


def test_a_binary_whose_ops_name_is_unknown_is_accepted_under_any(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    b = tmp_path / "mysched"
    b.write_bytes(elf())
    spec = sm.parse_spec(str(b))
    assert spec is not None and spec.ops == ""
    s = sm.resolve(spec, _kernel(tmp_path))
    assert s.ops == "" and s.record()["ops"] == "" and s.metadata["user"]["ops_known"] is False
    assert sm.guest_config(s)["LAB_SCHED_OPS"] == ""


def test_a_binary_for_another_arch_is_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    b = tmp_path / "scx_arm"
    b.write_bytes(elf(0xB7))
    spec = sm.parse_spec(str(b))  # the guest's arch is not known yet: checked against the kernel
    assert spec is not None
    k = _kernel(tmp_path)
    with pytest.raises(UserError) as e:
        sm.resolve(spec, k)
    assert str(e.value) == f"--scheduler {b}: a binary for arm64; the guest (kernel {k.label}) is x86_64"
    assert not sm.entries()


def _dynamic(tmp_path: Path, name: str = "scx_true") -> Path:
    """Debian's /bin/true (dynamically linked) under a scheduler's name, with 'true' as
    a string of its own (bytes after an ELF file's end change nothing it runs)."""
    b = tmp_path / name
    b.write_bytes(Path("/bin/true").read_bytes() + b"\0true\0")
    b.chmod(0o755)
    return b


def test_a_dynamic_binary_is_stored_with_its_loader_and_libraries_and_runs_from_them(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    b = _dynamic(tmp_path)
    spec = sm.parse_spec(str(b))
    assert spec is not None and (spec.kind, spec.ops) == ("binary", "true")
    k = _kernel(tmp_path)
    s = sm.resolve(spec, k)
    assert s.metadata["static"] is False
    libs = s.metadata["libraries"]
    assert "/lib64/ld-linux-x86-64.so.2" in libs and "/lib/x86_64-linux-gnu/libc.so.6" in libs
    root = s.binary.parent / sm.LIBS_DIR
    for g in libs:
        assert (root / g.lstrip("/")).exists() or (root / g.lstrip("/")).is_symlink(), g
    # The packed loader and libraries alone run it (the guest has no others).
    loader = root / "lib64" / "ld-linux-x86-64.so.2"
    cp = subprocess.run([str(loader), "--library-path", str(root / "lib" / "x86_64-linux-gnu"), str(s.binary)], check=False)
    assert cp.returncode == 0
    assert sm.find_built(spec, k) == s  # stored: a second run is a lookup
    # The libraries are part of the key: a static binary's key has none.
    assert "libraries" in sm.key(spec.name, k, {}, spec)
    st = tmp_path / "scx_static"
    st.write_bytes(elf())
    st_spec = sm.parse_spec(str(st))
    assert st_spec is not None and "libraries" not in sm.key(st_spec.name, k, {}, st_spec)


def test_a_dynamic_binary_s_layer_holds_its_libraries(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    spec = sm.parse_spec(str(_dynamic(tmp_path)))
    assert spec is not None
    s = sm.resolve(spec, _kernel(tmp_path))
    from lab.image import initramfs  # deferred: only this test looks inside a layer

    got: dict[str, Path] = {}

    def keep(kind, key, fill, progress=None):
        r = tmp_path / "layer"
        r.mkdir()
        fill(r)
        got["root"] = r
        return r

    monkeypatch.setattr(initramfs, "cached_tree_layer", keep)
    sm.binary_layer(s)
    r = got["root"]
    assert (r / "lab/sched/bin/scx_true").is_file()
    for g in s.metadata["libraries"]:
        assert (r / g.lstrip("/")).exists(), g


def test_a_dynamic_binary_whose_library_is_missing_is_refused_in_one_line(tmp_path, monkeypatch):
    from lab.image import tools  # deferred: only this test stands in for a missing library

    real_find = tools._Resolver.find
    monkeypatch.setattr(tools._Resolver, "find", lambda self, so, n, e: None if so == "libc.so.6" else real_find(self, so, n, e))
    b = _dynamic(tmp_path)
    assert _refused(str(b)) == f"--scheduler {b}: needs libc.so.6 (via {b}), which is not installed on this host"


# ---- the agent ----------------------------------------------------------------------------------------


def test_agent_takes_any_ops_name_when_lab_knows_none(tmp_path):
    """LAB_SCHED_OPS empty: whatever ops is enabled is the scheduler's (FAKE's is 'simple')."""
    root = tmp_path / "g"
    for d in ("out/scheduler", "lab/sched/bin", "sys/root"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "sys" / "state").write_text("disabled\n")
    (root / "mode").write_text("ok")
    binary = root / "lab/sched/bin/mysched"
    binary.write_text(FAKE.replace("__ROOT__", str(root)))
    binary.chmod(0o755)
    (root / "lab/sched/nargs").write_text("0\n")
    script = (
        "say() { echo \"lab: $*\" >> \"$ROOT/agent.log\"; }\nup() { echo 0; }\n"
        "LAB_SCHED=mysched LAB_SCHED_OPS= LAB_SCHED_WAIT=5\n"
        + _agent_part(root)
        + "if sched_start; then sleep 0.3; sched_stop; fi\n"
    )
    subprocess.run([_busybox(), "sh", "-c", script], env={"PATH": "/usr/bin:/bin", "ROOT": str(root)}, check=True, timeout=60)
    assert (root / "out/scheduler/status").read_text().strip() == "enabled"
    assert (root / "out/scheduler/during").read_text().strip() == "kept"
    assert sm.outcome(root / "out", "mysched", "") == ("", "")


@pytest.mark.parametrize("shown, ok", [("simple", True), ("simple_1.0.20_x86_64_unknown_linux_gnu", True), ("simplex", False), ("qmap", False)])
def test_agent_takes_the_ops_name_with_an_scx_version_suffix(tmp_path, shown, ok):
    """The scx project's Rust schedulers show NAME_VERSION_TARGET in root/ops: NAME's, and
    no other name that only starts like it."""
    root = tmp_path / "g"
    for d in ("out/scheduler", "lab/sched/bin", "sys/root"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "sys" / "state").write_text("disabled\n")
    (root / "mode").write_text("ok")
    binary = root / "lab/sched/bin/scx_simple"
    binary.write_text(FAKE.replace("__ROOT__", str(root)).replace("echo simple >", f"echo {shown} >"))
    binary.chmod(0o755)
    (root / "lab/sched/nargs").write_text("0\n")
    script = (
        "say() { echo \"lab: $*\" >> \"$ROOT/agent.log\"; }\nup() { echo 0; }\n"
        "LAB_SCHED=scx_simple LAB_SCHED_OPS=simple LAB_SCHED_WAIT=1\n"
        + _agent_part(root)
        + "if sched_start; then sleep 0.3; sched_stop; fi\n"
    )
    subprocess.run([_busybox(), "sh", "-c", script], env={"PATH": "/usr/bin:/bin", "ROOT": str(root)}, check=True, timeout=60)
    assert (root / "out/scheduler/status").read_text().strip() == ("enabled" if ok else "not-enabled")
    assert sm.ops_match(shown, "simple") is ok
    dmesg = f'sched_ext: BPF scheduler "{shown}" disabled (runtime error)\nsched_ext: {shown}: bad DSQ\n'
    assert sm.kernel_reason(dmesg, "simple") == ("runtime error: bad DSQ" if ok else "")
