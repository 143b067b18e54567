"""`python -m lab`: the `lab` command (how `lab matrix` starts each cell's `lab run`)."""

from .cli import main

main(prog_name="lab")
