"""sentitop engine package."""
