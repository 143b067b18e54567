"""A machine's CPU topology: the model (``model``: ``Topology``, ``Cpu``, ``Shape``) and
the TOML spec parser that loads it (``spec``: ``load``, ``loads``, ``from_dict``).

Both are re-exported here, so ``from lab.topology import Topology, load`` and
``topology.load(...)`` read as they did when the two were one module.
"""

from .model import (
    AMD_ZEN_RECLAIM_DISTANCE,
    CACHE_LEAVES,
    NUMBERINGS,
    RECLAIM_DISTANCE,
    VENDORS,
    Cpu,
    Provenance,
    Shape,
    Topology,
    fmt,
    irregularities,
    parse_cpus,
)
from .spec import (
    CACHE_NAMES,
    MAX_DMIPS_MHZ,
    SpecError,
    catalog,
    catalog_names,
    flatten_clusters,
    from_dict,
    load,
    loads,
    resolve,
)

__all__ = [
    "AMD_ZEN_RECLAIM_DISTANCE", "CACHE_LEAVES", "CACHE_NAMES", "MAX_DMIPS_MHZ", "NUMBERINGS", "RECLAIM_DISTANCE", "VENDORS",
    "Cpu", "Provenance", "Shape", "SpecError", "Topology",
    "catalog", "catalog_names", "flatten_clusters", "fmt", "from_dict", "irregularities", "load", "loads", "parse_cpus", "resolve",
]  # fmt: skip
