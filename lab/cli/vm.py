"""`lab boot` and `lab verify`."""

COMMANDS: list = []
