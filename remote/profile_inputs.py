"""A profile's local input files checked before a run starts (named with the profile and field)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.errors import ProfileError


def check_input_files(profile: Any) -> None:
    """Refuse (ProfileError, exit 2) a local ``data.inputs`` path that is not there, before a run
    folder, a dataset or a machine exists: a run started anyway failed at preprocessing with
    "cannot read input NAME", naming neither the profile nor the field. Relative paths are read
    from the folder `sentitop run` is started in; one that exists beside the profile file says
    so. (s3:// inputs are the EMR runner's to read.)"""
    for i, path in enumerate(profile.data.inputs):
        expanded = os.path.expanduser(path)
        if "://" in path or os.path.exists(expanded):
            continue
        source: Path | None = profile.source
        relative = not os.path.isabs(expanded)
        folder = source.parent if source is not None and relative else None
        beside = folder / expanded if folder is not None else None
        if folder is not None and beside is not None and beside.exists():
            hint = (
                f"it is beside the profile: give {beside.resolve()} (relative paths are read "
                f"from the folder `sentitop run` is started in), or start it in {folder}"
            )
        else:
            hint = "give the file's absolute path, or fix the name"
        looked = f" (relative to {os.getcwd()}, where this command runs)" if relative else ""
        raise ProfileError(
            f"{profile.where}: data.inputs[{i}]: {path!r}: no such file or folder{looked}",
            hint=hint,
        )
