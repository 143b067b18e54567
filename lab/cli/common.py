"""Shared pieces of the CLI: parameter types and the rich console."""

from __future__ import annotations

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

_console = None
_err_console = None


def console(stderr: bool = False):
    """lab's rich console (stdout), or one on stderr for commands whose stdout is JSON."""
    global _console, _err_console
    if stderr:
        if _err_console is None:
            from rich.console import Console

            _err_console = Console(stderr=True)
        return _err_console
    if _console is None:
        from rich.console import Console

        _console = Console()
        if not _console.is_terminal:
            # Piped or in CI: do not squeeze tables into 80 columns.
            _console = Console(width=160)
    return _console
