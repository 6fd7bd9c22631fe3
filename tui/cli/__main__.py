"""`python -m tui.cli` runs the sentitop CLI."""

from tui.cli.main import entry

entry()
