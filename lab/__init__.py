"""lab: reproduce a real machine's CPU topology in a VM and judge scheduler placement."""

__version__ = "0.1.0"
