"""`lab topo ...`."""

import click


@click.group()
def topo() -> None:
    """Topologies: list, show, render, capture, import."""
