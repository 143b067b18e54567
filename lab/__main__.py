"""`python -m lab`: the `lab` command (how `git bisect run` starts lab's step, and `lab matrix` each cell's `lab run`)."""

from .cli import main

main(prog_name="lab")
