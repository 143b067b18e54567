"""Shared pieces of the CLI: parameter types and the rich console."""

from __future__ import annotations

import functools

import click


class TopologyType(click.ParamType):
    """A catalog name or a spec file; loads and validates it."""

    name = "TOPOLOGY"

    def convert(self, value, param, ctx):
        from .. import topology

        if isinstance(value, topology.Topology):
            return value
        return topology.load(value)  # UserError -> one line from LabGroup

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        from .. import topology

        return [CompletionItem(n) for n in topology.catalog_names() if n.startswith(incomplete)]


TOPOLOGY = TopologyType()

def console(stderr: bool = False):
    """lab's rich console (stdout), or one on stderr for commands whose stdout is JSON."""
    return _console(bool(stderr))  # one per stream, however the flag is passed


@functools.cache
def _console(stderr: bool):
    from rich.console import Console

    c = Console(stderr=stderr)
    if not c.is_terminal:
        # Piped or in CI: do not squeeze tables into 80 columns.
        c = Console(stderr=stderr, width=160)
    return c
