"""sentitop remote package."""
