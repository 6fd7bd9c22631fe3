"""The headless `sentitop` commands (argparse + rich); never imports textual."""

from tui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
