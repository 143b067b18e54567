"""The spread of a figure over runs: one definition, lab compare's (sample standard
deviation), shared by compare and runner.aggregate (`lab run --repeat`).  A module of
its own so neither imports the other for it (that was an import cycle)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def summary(values: Sequence[float]) -> dict[str, Any]:
    """n, min, max, mean and the sample standard deviation (n - 1; 0 for one value)."""
    if not values:
        return {"n": 0, "min": None, "max": None, "mean": None, "stddev": None}
    return {
        "n": len(values),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
        "stddev": statistics.stdev(values) if len(values) > 1 else 0.0,
    }
