"""Subcommands of the sentitop CLI, one module each."""
