"""sentitop tui package."""
