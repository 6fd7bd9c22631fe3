"""Widgets of the dashboard: braille line plots, log pane, nav bar, table helpers."""
