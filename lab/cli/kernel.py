"""`lab kernel ...` (owned by the kernel-build work)."""

import click


@click.group()
def kernel() -> None:
    """Build, fetch and list kernels."""
