"""sched_ext schedulers (lab.scheduler): the recipe and its fragment, --scheduler's
NAME[:ARGS] and its quoting, the SKIP rule, cache keys, the guest agent's protocol (run
for real in busybox sh with the sysfs files faked) and the verdict on what it recorded."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import scheduler as sm
from lab.errors import UserError
from lab.kernel import config as kconfig
from lab.kernel import recipe
from lab.kernel.artifact import KernelArtifact
from lab.plan import SchedulerRef, VmOptions

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "lab" / "guest" / "init.sh"


def _kernel(tmp_path: Path, config: str | None = "CONFIG_SCHED_CLASS_EXT=y\n", *, arch: str = "x86_64",
            btf: bytes | None = b"\x9f\xeb\x01\x00btf", name: str = "lab-6.12-scx") -> KernelArtifact:  # fmt: skip
    entry = tmp_path / "kernel"
    entry.mkdir(exist_ok=True)
    (entry / "bzImage").write_bytes(b"image")
    cfg = None
    if config is not None:
        cfg = entry / "config"
        cfg.write_text(config)
    if btf is not None:
        (entry / sm.BTF_FILE).write_bytes(btf)
    meta = {"key": {"source": "debian:6.12=6.12.117-1~deb12u1 ", "patches": []}}
    return KernelArtifact(name, arch, entry / "bzImage", "6.12.117", None, cfg, frozenset(), "a" * 32, meta)


# ---- the recipe --------------------------------------------------------------------------------


def test_recipe_extends_lab_612_with_the_sched_ext_fragment():
    r = recipe.load("lab-6.12-scx")
    base = recipe.load("lab-6.12")
    assert (r.arch, r.source, r.base) == (base.arch, base.source, base.base)
    assert r.patches == base.patches  # the node_reclaim_distance= patch too
    assert [f.name for f in r.fragments][-1] == "sched-ext.config"
    assert "sched_ext" in r.all_features()
    want = kconfig.merge(r.all_fragments())
    for sym in ("SCHED_CLASS_EXT", "BPF_SYSCALL", "BPF_JIT", "DEBUG_INFO_BTF", "DEBUG_INFO", "BPF_JIT_ALWAYS_ON",
                "FUNCTION_TRACER", "DYNAMIC_FTRACE", "DYNAMIC_FTRACE_WITH_DIRECT_CALLS"):  # the last three: scx 1.1.x
        assert want[sym].value == "y", sym
    # lab-6.12's own recipe is untouched: its kernels keep their ids and build time.
    assert "SCHED_CLASS_EXT" not in kconfig.merge(base.all_fragments())
    assert recipe.input_digest(r) != recipe.input_digest(base)


def test_arm64_recipe_extends_lab_612_arm64_with_the_same_fragment():
    r = recipe.load("lab-6.12-scx-arm64")
    base = recipe.load("lab-6.12-arm64")
    assert (r.arch, r.source, r.base) == ("arm64", base.source, base.base)
    assert r.patches == base.patches
    assert [f.name for f in r.fragments][-1] == "sched-ext.config"
    assert "sched_ext" in r.all_features()
    want = kconfig.merge(r.all_fragments())
    # The whole fragment applies on arm64 6.12 too: with gcc and -O2 (lab.config's
    # CC_OPTIMIZE_FOR_PERFORMANCE), arm64 has ftrace's call ops and so direct calls
    # (arch/arm64/Kconfig); `lab kernel config lab-6.12-scx-arm64` checks all of it.
    for sym in ("SCHED_CLASS_EXT", "BPF_SYSCALL", "BPF_JIT", "DEBUG_INFO_BTF", "DYNAMIC_FTRACE_WITH_DIRECT_CALLS"):
        assert want[sym].value == "y", sym
    assert recipe.input_digest(r) != recipe.input_digest(base)


def test_sched_ext_recipe_named_for_the_skip_exists():
    for arch, name in sm.SCHED_EXT_RECIPE.items():
        assert recipe.load(name).arch == arch


# ---- NAME[:ARGS] ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "eevdf", "cfs", " eevdf "])
def test_the_kernels_own_scheduler_is_no_spec(text):
    assert sm.parse_spec(text) is None


def test_args_are_split_like_a_shell_but_never_run_by_one():
    s = sm.parse_spec("""scx_qmap:-s 20000 -d '$(reboot)' "a b" ; `id` | x > /y""")
    assert s is not None and s.name == "scx_qmap" and s.ops == "qmap"
    assert s.args == ("-s", "20000", "-d", "$(reboot)", "a b", ";", "`id`", "|", "x", ">", "/y")
    again = sm.parse_spec(s.text)  # what plan.json and the command file keep gives the same words
    assert again == s


def test_no_args():
    s = sm.parse_spec("scx_simple")
    assert s == sm.Spec("scx_simple", ()) and s.text == "scx_simple" and s.ops == "simple"
    assert sm.parse_spec("scx_simple:") == sm.Spec("scx_simple", ())


@pytest.mark.parametrize(
    "text, said",
    [
        ("scx_simple:'a", "cannot be split into words"),
        ("scx_nope", "unknown scheduler 'scx_nope'"),
        ("eevdf:-v", "takes no arguments"),
        ("scx_simple:a\0b", "NUL"),
    ],
)
def test_bad_specs_are_one_line(text, said):
    with pytest.raises(UserError) as e:
        sm.parse_spec(text)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_options_record_and_give_back_the_scheduler():
    o = VmOptions(scheduler="scx_qmap:-s 5")
    assert o.to_args() == ["--scheduler", "scx_qmap:-s 5"]
    assert VmOptions.from_args(o.to_args()).scheduler == "scx_qmap:-s 5"
    assert VmOptions.from_dict(o.to_dict()) == o


# ---- the SKIP rule --------------------------------------------------------------------------------


def test_no_skip_with_sched_ext(tmp_path):
    assert sm.skip_reason(_kernel(tmp_path)) is None


def test_skip_names_the_option_and_the_recipe(tmp_path):
    why = sm.skip_reason(_kernel(tmp_path, "# CONFIG_SCHED_CLASS_EXT is not set\n", name="debian-6.12"))
    assert why is not None
    assert "CONFIG_SCHED_CLASS_EXT is not set" in why and "--kernel lab-6.12-scx" in why


def test_skip_without_a_config(tmp_path):
    why = sm.skip_reason(_kernel(tmp_path, None))
    assert why is not None and "CONFIG_SCHED_CLASS_EXT cannot be read" in why


def test_skip_on_arm64_names_its_recipe(tmp_path):
    why = sm.skip_reason(_kernel(tmp_path, "", arch="arm64", name="lab-6.12-arm64"))
    assert why is not None and "--kernel lab-6.12-scx-arm64" in why


def test_a_kernel_with_sched_ext_but_no_btf_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="lab kernel build lab-6.12-scx --force"):
        sm.kernel_btf(_kernel(tmp_path, btf=None))


# ---- cache keys -----------------------------------------------------------------------------------

TOOLS = {"clang": "Debian clang version 16.0.6", "gcc": "gcc 12.2.0", "make": "GNU Make 4.3"}


def test_key_is_stable_and_follows_every_input(tmp_path):
    k = _kernel(tmp_path)
    base = sm.entry_id(sm.key("scx_simple", k, TOOLS))
    assert base == sm.entry_id(sm.key("scx_simple", k, dict(TOOLS)))
    assert len(base) == 32
    assert sm.entry_id(sm.key("scx_qmap", k, TOOLS)) != base
    assert sm.entry_id(sm.key("scx_simple", k, {**TOOLS, "clang": "clang 17"})) != base
    assert sm.entry_id(sm.key("scx_simple", k, {**TOOLS, "make": "GNU Make 4.4"})) == base  # make does not shape the output
    (k.image.parent / sm.BTF_FILE).write_bytes(b"\x9f\xeb\x01\x00other btf")
    assert sm.entry_id(sm.key("scx_simple", k, TOOLS)) != base
    k2 = KernelArtifact(k.name, k.arch, k.image, k.release, None, k.config, frozenset(), k.id,
                        {"key": {"source": "debian:6.12=6.12.118-1 ", "patches": []}})  # fmt: skip
    assert sm.entry_id(sm.key("scx_simple", k2, TOOLS)) != sm.entry_id(sm.key("scx_simple", k, TOOLS))


def test_make_and_link_commands(tmp_path):
    argv = sm.make_argv(tmp_path / "src", tmp_path / "obj", "scx_simple", tmp_path / "vmlinux.btf", 2)
    assert argv[:3] == ["make", "-C", str(tmp_path / "src" / "tools" / "sched_ext")]
    assert f"CLANG={sm.CLANG}" in argv and f"VMLINUX_BTF={tmp_path / 'vmlinux.btf'}" in argv and argv[-1] == "scx_simple"
    assert not any(a.startswith("LDFLAGS=") for a in argv)  # it would reach libbpf's shared-object link
    link = sm.link_argv(tmp_path / "obj", "scx_simple", tmp_path / "out")
    assert "-static" in link and link[-4:] == ["-lelf", "-lz", "-lzstd", "-lpthread"]


# ---- a cross build (arm64 on an x86_64 host) ------------------------------------------------------


@pytest.fixture
def x86_host(monkeypatch):
    monkeypatch.setattr(sm.archs, "host_name", lambda: "x86_64")


def test_cross_prefix_is_the_arch_s_gcc_and_other_pairs_are_refused(x86_host, monkeypatch):
    assert sm.cross_prefix("x86_64") == "" and sm.cross_prefix("arm64") == "aarch64-linux-gnu-"
    assert sm.tree_parts("x86_64") == sm.TREE_PARTS
    assert sm.tree_parts("arm64") == (*sm.TREE_PARTS, "arch/arm64/include/uapi")  # libbpf's asm/bpf_perf_event.h
    monkeypatch.setattr(sm.archs, "host_name", lambda: "arm64")
    assert sm.cross_prefix("arm64") == ""
    with pytest.raises(UserError, match=r"^scheduler builds for x86_64 kernels on this arm64 host are not supported \(lab cross-builds for arm64 on x86_64\)$"):
        sm.cross_prefix("x86_64")


def _fake_tools(d: Path, names: list[str]) -> None:
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_text(f"#!/bin/sh\necho '{n} (fake) 1.0'\n")
        (d / n).chmod(0o755)


def test_toolchain_of_arm64_takes_the_cross_gcc(x86_host, tmp_path, monkeypatch):
    _fake_tools(tmp_path / "bin", [sm.CLANG, sm.LLVM_STRIP, "make", "aarch64-linux-gnu-gcc"])
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    tools = sm.toolchain("arm64")  # no host libelf.a asked for: the arch's comes from Debian's arm64 packages
    assert tools["gcc"] == "aarch64-linux-gnu-gcc (fake) 1.0" and tools["clang"] == f"{sm.CLANG} (fake) 1.0"
    (tmp_path / "bin" / "aarch64-linux-gnu-gcc").unlink()
    with pytest.raises(UserError, match=r"^aarch64-linux-gnu-gcc not found: .*gcc-aarch64-linux-gnu and libc6-dev-arm64-cross"):
        sm.toolchain("arm64")


def test_a_cross_key_differs_and_a_native_one_is_as_before(x86_host, tmp_path):
    k = _kernel(tmp_path)
    native = sm.key("scx_simple", k, TOOLS)
    assert "cross" not in native  # x86 schedulers keep their store ids
    a = _kernel(tmp_path, arch="arm64", name="lab-6.12-scx-arm64")
    cross = sm.key("scx_simple", a, TOOLS)
    assert cross["arch"] == "arm64" and cross["cross"] == {"prefix": "aarch64-linux-gnu-", "libraries": list(sm.CROSS_DEV_PACKAGES)}
    assert sm.entry_id(cross) != sm.entry_id(native)


def test_cross_make_and_link_commands(tmp_path):
    c = sm.Cross("arm64", "aarch64-linux-gnu-", tmp_path / "dev", tmp_path / "host" / "build" / "sbin" / "bpftool")
    out = tmp_path / "obj"
    argv = sm.make_argv(tmp_path / "src", out, "scx_simple", tmp_path / "vmlinux.btf", 2, cross=c)
    native = sm.make_argv(tmp_path / "src", out, "scx_simple", tmp_path / "vmlinux.btf", 2)
    assert [a for a in argv if a in native] == native  # the native command's words, in order
    libdirs = [tmp_path / "dev" / "usr" / "lib" / "aarch64-linux-gnu", tmp_path / "dev" / "lib" / "aarch64-linux-gnu"]
    assert [a for a in argv if a not in native] == [
        "ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", f"BPFTOOL={c.bpftool}",
        f"HOST_BPFOBJ={out / 'build' / 'obj' / 'libbpf' / 'libbpf.a'}",
        f"LDFLAGS=-L{libdirs[0]} -L{libdirs[1]} -Wl,-rpath-link={libdirs[0]}:{libdirs[1]} -lelf -lz -lpthread",
    ]  # fmt: skip
    assert c.env() == {"CPATH": str(tmp_path / "dev" / "usr" / "include")}
    assert sm.bpftool_argv(tmp_path / "src", tmp_path / "host", tmp_path / "vmlinux.btf", 2)[-1] == str(c.bpftool)
    link = sm.link_argv(out, "scx_simple", tmp_path / "out", c)
    assert link[0] == "aarch64-linux-gnu-gcc" and link[5:7] == [f"-L{d}" for d in libdirs]
    assert link[7:] == list(sm.STATIC_LIBS)
    assert sm.link_argv(out, "scx_simple", tmp_path / "out")[0] == "gcc"


def test_build_for_an_arch_lab_does_not_cross_build_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sm.archs, "host_name", lambda: "arm64")
    with pytest.raises(UserError, match="^scheduler builds for x86_64 kernels on this arm64 host are not supported"):
        sm.build("scx_simple", _kernel(tmp_path))


def test_store_entries_and_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    e = sm.root() / ("b" * 32)
    e.mkdir()
    (e / "scx_simple").write_bytes(b"\x7fELF")
    (e / "metadata.json").write_text(json.dumps({"id": "b" * 32, "name": "scx_simple", "arch": "x86_64", "binary": "scx_simple", "version": "v"}))
    bad = sm.root() / ("c" * 32)
    bad.mkdir()
    (bad / "metadata.json").write_text(json.dumps({"id": "c" * 32, "name": "x", "arch": "x86_64", "binary": "../etc"}))
    assert [s.id for s in sm.entries()] == ["b" * 32]
    s = sm.get("bbbb")
    assert s is not None and s.label == "scx_simple@bbbbbbbb" and s.ops == "simple"
    assert sm.get("scx_simple@bbbb") == s and sm.get("dddd") is None
    rec = s.record(("-v", "a b"))
    ref = SchedulerRef.from_dict(json.loads(json.dumps(rec)))
    assert ref.args == ("-v", "a b") and ref.name == "scx_simple" and ref.to_dict()["args"] == ["-v", "a b"]


def test_plan_json_keeps_the_scheduler():
    ref = SchedulerRef("scx_qmap", "qmap", ("-s", "$(x)"), "debian:6.12 tools/sched_ext/scx_qmap", "i" * 32)
    assert SchedulerRef.from_dict(ref.to_dict()) == ref
    with pytest.raises(ValueError):
        SchedulerRef.from_dict({"name": "x", "args": "-v"})


# ---- the guest's files and the agent ------------------------------------------------------------

ARGS = ("-s", "20000", "$(reboot)", "a b", "'q'", 'd"q', "tab\there", "new\nline", "trailing\n\n", "", "é", "\udcff")


def test_guest_files_hold_each_argument_as_data(tmp_path):
    s = sm.Scheduler("scx_simple", "x86_64", tmp_path / "b", "i" * 32, {})
    files = sm.guest_files(s, ARGS)
    assert files["lab/sched/nargs"] == f"{len(ARGS)}\n".encode()
    assert files["lab/sched/arg.2"] == b"$(reboot)"
    assert files[f"lab/sched/arg.{len(ARGS) - 1}"] == b"\xff"  # a non-UTF-8 byte as it was given
    cfg = sm.guest_config(s)
    assert cfg == {"LAB_SCHED": "scx_simple", "LAB_SCHED_OPS": "simple", "LAB_SCHED_WAIT": str(sm.ENABLE_WAIT_S)}
    assert not any("$(reboot)" in v for v in cfg.values())  # arguments never go through /lab/config


def test_job_layer_makes_the_directories_of_nested_files(tmp_path):
    from lab.image import initramfs

    out = initramfs.job_layer(tmp_path / "job.cpio", "#!/bin/sh\n", {}, files={"lab/sched/arg.0": b"x"})
    names = re.findall(rb"070701[0-9A-Fa-f]{104}([^\0]+)\0", out.read_bytes())
    assert names.index(b"lab/sched") < names.index(b"lab/sched/arg.0")


def _busybox() -> str:
    for b in ("/bin/busybox", "/usr/bin/busybox"):
        if os.path.exists(b):
            return b
    pytest.skip("busybox not installed")
    return ""


def _agent_part(root: Path) -> str:
    """The scheduler part of lab's agent, pointed at *root* instead of / ."""
    text = AGENT.read_text()
    start = text.index("SCHED_DIR=/tmp/out/scheduler")
    end = text.index("rc=0\nsched_ok=1")
    part = text[start:end]
    return (part.replace("/tmp/out/scheduler", f"{root}/out/scheduler")
                .replace("/lab/sched", f"{root}/lab/sched")
                .replace("/sys/kernel/sched_ext", f"{root}/sys"))  # fmt: skip


FAKE = r"""#!/bin/sh
# a fake scheduler: records its argv (NUL-separated), then acts out MODE
R=__ROOT__
for a in "$@"; do printf '%s\0' "$a"; done > "$R/argv"
case "$(cat "$R/mode")" in
  ok) echo simple > "$R/sys/root/ops"; echo enabled > "$R/sys/state"; echo 1 > "$R/sys/enable_seq"
      trap 'echo disabled > "$R/sys/state"; echo "EXIT: unregistered from user space"; exit 0' TERM
      while :; do sleep 0.05; done ;;
  eject) echo simple > "$R/sys/root/ops"; echo enabled > "$R/sys/state"; echo 1 > "$R/sys/enable_seq"
      sleep 0.3; echo disabled > "$R/sys/state"; echo "EXIT: runnable task stall"; exit 0 ;;
  reject) echo "libbpf: prog 'simple_enqueue': BPF program load failed: Permission denied"
      echo "libbpf: -- BEGIN PROG LOAD LOG --"; echo "R1 invalid mem access 'scalar'"; exit 1 ;;
esac
"""


def _run_agent(tmp_path: Path, mode: str, args: tuple[str, ...], job: str = "sleep 0.5") -> Path:
    root = tmp_path / "g"
    for d in ("out/scheduler", "lab/sched/bin", "sys/root"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "sys" / "state").write_text("disabled\n")
    (root / "mode").write_text(mode)
    binary = root / "lab/sched/bin/scx_simple"
    binary.write_text(FAKE.replace("__ROOT__", str(root)))
    binary.chmod(0o755)
    s = sm.Scheduler("scx_simple", "x86_64", binary, "i" * 32, {})
    for name, data in sm.guest_files(s, args).items():
        (root / name).write_bytes(data)
    script = (
        "say() { echo \"lab: $*\" >> \"$ROOT/agent.log\"; }\nup() { echo 0; }\n"
        "LAB_SCHED=scx_simple LAB_SCHED_OPS=simple LAB_SCHED_WAIT=5\n"
        + _agent_part(root)
        + f"if sched_start; then {job}; sched_stop; fi\n"
    )
    env = {"PATH": "/usr/bin:/bin", "ROOT": str(root)}
    subprocess.run([_busybox(), "sh", "-c", script], env=env, check=True, timeout=60)
    return root


def test_agent_passes_arguments_byte_for_byte_and_records_a_kept_scheduler(tmp_path):
    root = _run_agent(tmp_path, "ok", ARGS)
    got = (root / "argv").read_bytes().split(b"\0")[:-1]
    assert got == [a.encode("utf-8", "surrogateescape") for a in ARGS]
    d = root / "out" / "scheduler"
    assert (d / "status").read_text().strip() == "enabled"
    assert (d / "during").read_text().strip() == "kept"
    assert (d / "exit").read_text().strip() == "0"  # stopped by SIGTERM, which its loader handles
    assert sm.outcome(root / "out", "scx_simple", "simple") == ("", "")
    log = (root / "agent.log").read_text()
    assert "scheduler enabled ops=simple" in log and "scheduler stopped during=kept" in log


def test_agent_records_an_ejection(tmp_path):
    root = _run_agent(tmp_path, "eject", (), job="sleep 1")
    assert (root / "out/scheduler/during").read_text().strip() == "ejected"
    (root / "out" / "dmesg").write_text(
        "[   9.1] sched_ext: BPF scheduler \"simple\" disabled (runnable task stall)\n"
        "[   9.1] sched_ext: simple: kworker/u8:1[33] failed to run for 30.4s\n"
        "[  12.0] sched_ext: BPF scheduler \"simple\" disabled (unregistered from user space)\n"
    )
    status, why = sm.outcome(root / "out", "scx_simple", "simple")
    assert status == "FAIL"
    assert "runnable task stall: kworker/u8:1[33] failed to run for 30.4s" in why
    assert "EXIT: runnable task stall" in why


def test_agent_records_a_scheduler_that_never_loads(tmp_path):
    root = _run_agent(tmp_path, "reject", ())
    d = root / "out" / "scheduler"
    assert (d / "status").read_text().strip() == "not-enabled"
    assert (d / "exit").read_text().strip() == "1"
    assert not (d / "during").exists()
    status, why = sm.outcome(root / "out", "scx_simple", "simple")
    assert status == "ERROR"
    assert why.startswith("scheduler scx_simple never reached enabled (sched_ext state disabled, exit 1)")
    assert "R1 invalid mem access 'scalar'" in why  # the verifier's log, as libbpf printed it


def test_outcome_without_a_record_is_an_error(tmp_path):
    status, why = sm.outcome(tmp_path, "scx_simple", "simple")
    assert status == "ERROR" and "no record" in why


def test_kernel_reason_picks_the_named_scheduler():
    log = 'sched_ext: BPF scheduler "qmap" disabled (error)\nsched_ext: qmap: scx_bpf_error (boom)\n'
    assert sm.kernel_reason(log, "qmap") == "error: scx_bpf_error (boom)"
    assert sm.kernel_reason(log, "simple") == ""
    assert sm.kernel_reason('sched_ext: BPF scheduler "simple" disabled (unregistered from BPF)\n') == "unregistered from BPF"


def test_agent_script_parses():
    sh = shutil.which("sh") or "/bin/sh"
    subprocess.run([sh, "-n", str(AGENT)], check=True)


def test_elf_arch_names_the_binary_s_machine():
    hdr = bytearray(b"\x7fELF" + bytes(60))
    hdr[18:20] = (0x3E).to_bytes(2, "little")
    assert sm.elf_arch(bytes(hdr)) == "x86_64"
    hdr[18:20] = (0xB7).to_bytes(2, "little")
    assert sm.elf_arch(bytes(hdr)) == "arm64"
    hdr[18:20] = (0x28).to_bytes(2, "little")
    assert sm.elf_arch(bytes(hdr)) == "e_machine 40"
    assert sm.elf_arch(b"#!/bin/sh\n") is None
    assert sm.elf_arch(Path("/bin/sh").read_bytes()[:64]) == "x86_64" or os.uname().machine != "x86_64"


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="binutils not installed")
def test_extract_btf_takes_the_section_byte_for_byte(tmp_path):
    """The kernel's .BTF, as the store entry keeps it (objcopy -O binary would pad it out
    to its load address)."""
    from lab.kernel.build import elf_section, extract_btf

    blob = b"\x9f\xeb\x01\x00" + bytes(range(256)) * 3
    (tmp_path / "btf").write_bytes(blob)
    elf = tmp_path / "vmlinux"
    subprocess.run(["objcopy", "--add-section", f".BTF={tmp_path / 'btf'}", "/bin/true", str(elf)], check=True)
    assert extract_btf(elf, tmp_path / "out") and (tmp_path / "out").read_bytes() == blob
    assert elf_section(elf, ".nope") is None
    assert not extract_btf(Path("/bin/true"), tmp_path / "none") and not (tmp_path / "none").exists()
    assert not extract_btf(tmp_path / "btf", tmp_path / "none")  # not ELF
    assert not extract_btf(tmp_path / "missing", tmp_path / "none")


def test_the_kernel_spec_tells_lab_scheduler_build_its_arch(tmp_path, monkeypatch):
    from lab.kernel import spec_arch

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))  # an empty store
    assert spec_arch("lab-6.12-scx-arm64", "x86_64") == "arm64" and spec_arch("lab-6.12-scx", "arm64") == "x86_64"
    assert spec_arch("debian-6.12", "arm64") == "arm64" and spec_arch("nope-kernel", "x86_64") == "x86_64"
