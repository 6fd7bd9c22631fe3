"""The dashboard's screens, one module each (with a .tcss beside it)."""
