"""A bench/ script as a module, for the tests that use its functions (bench/ is scripts,
not a package).  Loaded once per test session."""

import importlib.util
from functools import cache
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


@cache
def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
