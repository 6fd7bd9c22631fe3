"""Write the planner's chosen configuration as a new profile (validated before it is kept)."""

from __future__ import annotations

import math
import os
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from engine.errors import InputError, ProfileError
from remote.profile import EC2Profile, Profile, load_profile
from remote.review.candidates import Candidate
from remote.review.money_text import duration_text, money

DEFAULT_KEY = {"key_name": "sentitop", "key": "~/.ssh/sentitop.pem"}
"""SSH access of new EC2 groups when the source profile has none (the shipped profiles' own)."""

_ACCESS = ("key_name", "key", "user", "ami", "subnet", "security_group")
_EC2_ONLY = ("ready_timeout", "shutdown_unwatched_after", "insecure_ignore_host_keys")
"""Settings of an EC2 (or SSH) source profile a written EC2 profile keeps (they were dropped:
a 15-minute SSH wait and host-key checks came back without a word)."""


def _clean(value: Any) -> Any:
    """Drop None, empty lists and empty mappings (the defaults), recursively."""
    if isinstance(value, dict):
        out = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def chosen_config(
    profile: Profile, cand: Candidate, epochs: int, data_size: int | None = None
) -> dict[str, Any]:
    """The profile's settings with the candidate's machines, epochs and a budget of its band.

    ``data_size`` (the plan's --data-size) becomes the size of a synthetic profile's reviews;
    a profile of input files keeps them (their size is not a setting)."""
    data = profile.resolved()
    if data_size is not None and data["data"].get("synthetic") is not None:
        data["data"] = {**data["data"], "synthetic": {**data["data"]["synthetic"]}}
        data["data"]["synthetic"]["size"] = data_size
    train = dict(data["train"])
    train["epochs"] = epochs
    out: dict[str, Any] = {
        "name": f"{profile.name}-plan"[:64],
        "description": f"{cand.label}: chosen by `sentitop plan` from {profile.name}",
        "region": data["region"],
        "data": data["data"],
        "preprocess": data["preprocess"],
    }
    if data.get("python"):
        out["python"] = data["python"]
    out["recovery"] = data.get("recovery")  # a spot setup kept its recovery: it was dropped
    if cand.groups:
        access = dict(DEFAULT_KEY)
        if isinstance(profile, EC2Profile):
            first = profile.nodes[0].model_dump(mode="json")
            access = {k: first[k] for k in _ACCESS if first.get(k) is not None}
        nodes = []
        for name, count, spot in cand.groups:
            node: dict[str, Any] = {"instance_type": name, "count": count, **access}
            if spot:
                node["spot"] = True
            nodes.append(node)
        train.pop("nproc", None)
        if len({g[0] for g in cand.groups}) > 1:
            train["balance"] = {**(train.get("balance") or {}), "enabled": True}
        out.update(provider="ec2", nodes=nodes)
        for key in ("workdir", "shared_fs", "known_hosts", *_EC2_ONLY):
            if key in data:
                out[key] = data[key]
    else:
        out["provider"] = profile.provider
        for key in ("instance_type", "nodes", "workdir", "shared_fs", "known_hosts", *_EC2_ONLY):
            if key in data:
                out[key] = data[key]
        if profile.provider == "local":
            train["nproc"] = cand.workers
    out["train"] = train
    out["budget"] = {
        "max_usd": max(0.01, math.ceil(budget_usd(cand, data) * 100) / 100),
        "max_usd_per_hour": max(0.001, math.ceil(cand.usd_per_hour * 1000) / 1000),
    }
    cleaned: dict[str, Any] = _clean(out)
    return cleaned


def start_up_allowance_s(cand: Candidate, data: dict[str, Any]) -> float:
    """Seconds of start-up a written budget allows for on top of the predicted training: for
    EC2 machines their SSH wait (the profile's ready_timeout, else the default 15 min), billed
    and counted against the budget while instances boot, answer and get the code and data; a
    budget of the training alone stopped the run before it trained (0 for local machines)."""
    if not cand.groups:
        return 0.0
    from remote.clusters.ec2_fleet import READY_TIMEOUT_S

    return float(data.get("ready_timeout") or READY_TIMEOUT_S)


def budget_usd(cand: Candidate, data: dict[str, Any]) -> float:
    """The written budget: the slow end of the candidate's band plus its start-up allowance."""
    return cand.usd_high + cand.usd_per_hour * start_up_allowance_s(cand, data) / 3600


def size_warning(profile: Profile, data_size: int | None) -> str | None:
    """Why a written profile of input files does not carry ``data_size`` (None if it does)."""
    if data_size is None or profile.data.synthetic is not None:
        return None
    return (
        f"planned for --data-size {data_size} ({data_size / 1e9:.4g} GB), which a profile "
        "cannot record (data.inputs names files, not their size): plan the written profile "
        f"again with --data-size {data_size}, or it assumes another training-set size"
    )


def write_profile(
    profile: Profile,
    cand: Candidate,
    epochs: int,
    path: str | Path,
    *,
    data_size: int | None = None,
) -> Profile:
    """Write the chosen configuration to ``path`` and return it loaded (validated).

    With ``data_size`` a synthetic profile's size is set to it; for input files the header
    carries :func:`size_warning` (the CLI repeats it on stderr)."""
    path = Path(path).expanduser()
    if path.suffix not in (".yaml", ".yml"):
        raise InputError(f"--write-profile {path}: expected a .yaml file name")
    if profile.source is not None and path.resolve() == Path(profile.source).resolve():
        raise InputError(
            f"--write-profile {path}: that is the profile being planned; it would be replaced",
            hint="name a new file, e.g. " + str(path.with_name(f"{path.stem}-plan{path.suffix}")),
        )
    if path.is_dir():
        raise InputError(f"--write-profile {path}: a folder, not a file name")
    if path.exists() and not _written_by_plan(path):
        raise InputError(
            f"--write-profile {path}: a file that `sentitop plan` did not write is there; it "
            "would be replaced",
            hint="name a new file, e.g. "
            + str(path.with_name(f"{path.stem}-plan{path.suffix}"))
            + f", or remove {path} first",
        )
    high = cand.seconds * cand.band  # the prediction and its band in the upper end's unit
    header = (
        f"{WRITTEN_BY}{profile.name}` on {date.today().isoformat()}: "
        f"{cand.label} ({cand.hardware}),\n"
        f"# {epochs} epoch(s) predicted {duration_text(cand.seconds, high)} (band "
        f"{duration_text(cand.seconds / cand.band, high)} – {duration_text(high)}), "
        f"{money(cand.usd)} (budget below: the slow end{_allowance(cand, profile)}).\n"
        f"# Basis: {cand.basis}\n"
    )
    warning = size_warning(profile, data_size)
    if warning:
        header += f"# WARNING: {warning}\n"
    config = chosen_config(profile, cand, epochs, data_size)
    text = header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    draft = _validated_draft(text, path, data_size)  # a file already at `path` stays until then
    try:
        os.replace(draft, path)
    except OSError as exc:
        draft.unlink(missing_ok=True)
        raise InputError(f"--write-profile {path}: cannot write ({exc})") from None
    return load_profile(path)


WRITTEN_BY = "# Written by `sentitop plan "
"""How a profile written by plan begins: such a file may be written again (a plan redone)."""


def _written_by_plan(path: Path) -> bool:
    """True when ``path`` begins as a profile written by --write-profile does."""
    try:
        with path.open("rb") as fh:
            return fh.read(len(WRITTEN_BY)) == WRITTEN_BY.encode()
    except OSError:
        return False


def _allowance(cand: Candidate, profile: Profile) -> str:
    seconds = start_up_allowance_s(cand, profile.resolved())
    return (
        f", plus {seconds / 60:g} min of start-up at {money(cand.usd_per_hour)}/h"
        if seconds
        else ""
    )


def _validated_draft(text: str, path: Path, data_size: int | None) -> Path:
    """``text`` written beside ``path`` under a temporary name and validated as a profile;
    removed again (and the problem raised, naming ``path``) when it does not validate."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".yaml", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"--write-profile {path}: cannot write ({exc})") from None
    draft = Path(name)
    try:
        load_profile(draft)
    except ProfileError as exc:
        draft.unlink(missing_ok=True)
        message = exc.message.replace(str(draft), str(path))
        if data_size is not None and "data.synthetic.size" in message:
            raise InputError(
                f"--data-size {data_size}: not a size the written profile's "
                f"data.synthetic.size accepts ({message.split(': ', 2)[-1]})"
            ) from None
        raise ProfileError(message, hint=exc.hint) from None
    return draft
