"""`python -m lab`: the `lab` command (git bisect run starts lab's step this way)."""

from .cli import main

main(prog_name="lab")
