"""Kernel config: base + fragments merged, then checked with kconfiglib.

A fragment line is ``CONFIG_X=value`` or ``# CONFIG_X is not set``; blank lines and
other comments are ignored; anything else is an error naming file:line.  Later
fragments override earlier ones.  After ``make olddefconfig`` every requested
symbol is checked against the source's own Kconfig tree; one that did not keep its
requested value is reported with the dependency that is not met.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import kconfiglib

from .. import arch as archs
from .. import proc
from ..errors import UserError

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class Request:
    """One requested symbol value, and where it was asked for."""

    name: str  # without CONFIG_
    value: str  # "y", "m", "n", or the literal text (strings keep their quotes)
    where: str  # file:line

    def line(self) -> str:
        if self.value == "n":
            return f"# CONFIG_{self.name} is not set"
        return f"CONFIG_{self.name}={self.value}"


def parse_fragment(path: Path) -> list[Request]:
    out = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _SET.match(line)
        if m:
            val = m[2]
            if val == "":
                raise UserError(
                    f"{path}:{n}: '{line}' has no value (write CONFIG_X=y, =m, =n, a number or \"string\")"
                )
            out.append(Request(m[1][7:], val, f"{path}:{n}"))
            continue
        m = _UNSET.match(line)
        if m:
            out.append(Request(m[1][7:], "n", f"{path}:{n}"))
            continue
        if line.startswith("#"):
            continue
        raise UserError(
            f"{path}:{n}: '{line}' is neither CONFIG_X=value nor '# CONFIG_X is not set'"
        )
    return out


def merge(fragments: list[Path] | tuple[Path, ...]) -> dict[str, Request]:
    """Requests from *fragments* in order; a later fragment wins."""
    merged: dict[str, Request] = {}
    for f in fragments:
        for r in parse_fragment(f):
            merged.pop(r.name, None)
            merged[r.name] = r
    return merged


def read_config(path: Path) -> dict[str, str]:
    """A .config as {NAME: value} ("n" for '# CONFIG_X is not set')."""
    out = {}
    for line in path.read_text().splitlines():
        m = _SET.match(line)
        if m:
            out[m[1][7:]] = m[2]
            continue
        m = _UNSET.match(line)
        if m:
            out[m[1][7:]] = "n"
    return out


def write_merged(base: Path, requests: dict[str, Request], dest: Path) -> None:
    """Write *base* with *requests* applied on top (replacing lines for the same symbol)."""
    lines = []
    for line in base.read_text().splitlines():
        m = _SET.match(line) or _UNSET.match(line)
        if m and m[1][7:] in requests:
            continue
        lines.append(line)
    lines += [r.line() for r in requests.values()]
    dest.write_text("\n".join(lines) + "\n")


# --- kconfiglib check ------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    request: Request
    actual: str
    reason: str

    def __str__(self) -> str:
        return (
            f"CONFIG_{self.request.name}={self.request.value} ({self.request.where}) "
            f"ended up {self.actual}: {self.reason}"
        )


def kconfig_env(srctree: Path, arch: str, cc: str, ld: str, kernelversion: str = "") -> dict:
    """The environment the kernel's Makefile gives Kconfig, for kconfiglib."""

    karch = archs.get(arch).kernel_arch
    cc_text = proc.run([*cc.split(), "--version"]).stdout.decode().splitlines()[0]
    return {
        "srctree": str(srctree),
        "ARCH": karch,
        "SRCARCH": karch,
        "KERNELVERSION": kernelversion,
        "CC": cc,
        "LD": ld,
        "HOSTCC": "gcc",
        "HOSTCXX": "g++",
        "CC_VERSION_TEXT": cc_text,
        "CLANG_FLAGS": "",
        "RUSTC": "rustc",
        "BINDGEN": "bindgen",
        "PAHOLE": "pahole",
    }


def _kconfig_class():
    class Kconfig(kconfiglib.Kconfig):
        # Linux 5.13 replaced "option modules" with a bare "modules" line
        # (6dd85ff178cd "kconfig: change "modules" from sub-option to first-level
        # attribute"); kconfiglib 14.1 only knows the old spelling.  Both mean the
        # MODULES symbol, which kconfiglib assumes anyway.
        def _tokenize(self, s):
            if s.strip() == "modules":
                s = "option modules"
            return super()._tokenize(s)

    return Kconfig


def load_kconfig(srctree: Path, env: dict, config: Path | None = None):
    """A kconfiglib.Kconfig for *srctree* (with *config* loaded if given)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        kconf = _kconfig_class()(str(srctree / "Kconfig"), warn=False, warn_to_stderr=False)
        if config is not None:
            kconf.load_config(str(config), replace=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return kconf


def check(kconf, requests: dict[str, Request]) -> list[Problem]:
    """Requested values that the loaded config does not have, each with a reason."""

    problems = []
    for r in requests.values():
        sym = kconf.syms.get(r.name)
        if sym is None or not sym.nodes:
            problems.append(Problem(r, "absent", "no such symbol in this kernel's Kconfig"))
            continue
        actual = (
            sym.str_value
            if sym.type not in (kconfiglib.BOOL, kconfiglib.TRISTATE)
            else (kconfiglib.TRI_TO_STR[sym.tri_value])
        )
        want = r.value
        if sym.type == kconfiglib.STRING:
            want = want[1:-1] if len(want) >= 2 and want[0] == want[-1] == '"' else want
        elif sym.type in (kconfiglib.INT, kconfiglib.HEX):
            try:
                same = int(want, 0) == int(actual or "0", 0)
            except ValueError:
                same = want == actual
            if same:
                continue
        if actual == want:
            continue
        problems.append(Problem(r, actual or '""', _why(kconf, sym, want)))
    return problems


def _value(sym) -> str:
    if sym.type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
        return kconfiglib.TRI_TO_STR[sym.tri_value]
    return sym.str_value or '""'


def _why(kconf, sym, want: str) -> str:
    expr_str = kconfiglib.expr_str
    if want in ("y", "m") and kconfiglib.expr_value(sym.direct_dep) == 0:
        unmet = [t for t in kconfiglib.split_expr(sym.direct_dep, kconfiglib.AND) if kconfiglib.expr_value(t) == 0]
        leaves = []
        for t in unmet:
            for item in kconfiglib.expr_items(t):
                if isinstance(item, kconfiglib.Symbol) and not item.is_constant:
                    leaves.append(f"{item.name}={_value(item)}")
        detail = f" (now {', '.join(dict.fromkeys(leaves))})" if leaves else ""
        return f"unmet dependency: depends on {' && '.join(expr_str(t) for t in unmet)}{detail}"
    if want == "n" and kconfiglib.expr_value(sym.rev_dep) > 0:
        sel = [expr_str(t) for t in kconfiglib.split_expr(sym.rev_dep, kconfiglib.OR) if kconfiglib.expr_value(t) > 0]
        return f"selected by {' || '.join(sel)}"
    if want in ("y", "m") and sym.visibility == 0:
        return "not user-settable (no prompt); enable an option that selects it"
    if want == "y" and sym.visibility == 1:
        return "limited to m by its dependencies (a tristate dependency is m)"
    if sym.choice is not None and want == "y":
        sel = sym.choice.selection
        return f"choice picked {sel.name if sel else 'nothing'} (another fragment may select it)"
    if sym.type in (kconfiglib.INT, kconfiglib.HEX) and sym.ranges:
        rng = [
            f"{expr_str(lo)}..{expr_str(hi)}" for lo, hi, cond in sym.ranges if kconfiglib.expr_value(cond)
        ]
        if rng:
            return f"outside its range {rng[0]}"
    return "olddefconfig changed it (check its help and dependencies in menuconfig)"
