"""`python -m tui` runs the sentitop CLI."""

from tui.cli.main import entry

entry()
