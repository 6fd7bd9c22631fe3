"""Keeping credentials out of run folders: redaction, a secret scanner, user-only folders."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REDACTED = "***"
"""What a secret is replaced with."""

SECRET_KEY = re.compile(
    r"(secret|password|passwd|token|credential|private_key|api_?key|authorization)", re.IGNORECASE
)
"""Mapping keys whose values are always redacted."""

SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "aws access key id": re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}\b"),
    "aws secret access key": re.compile(
        r"(?i)(aws_secret_access_key|secret_?access_?key)(\s*[=:]\s*|\"\s*:\s*\")[A-Za-z0-9/+=]{40}"
    ),
    "aws session token": re.compile(
        r"(?i)(aws_session_token|session_?token)(\s*[=:]\s*|\"\s*:\s*\")[A-Za-z0-9/+=]{16,}"
    ),
    "private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----"),
}
"""Text patterns that look like credentials wherever they appear."""

PEM_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----.*?"
    r"(-----END (?:[A-Z0-9]+ )?PRIVATE KEY-----|$)",
    re.DOTALL,
)
"""A whole PEM private key block (to the END line, or the end of the text)."""


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with credential-looking substrings and the ``known`` secret values replaced."""
    for value in known:
        if value and len(value) >= 8:
            text = text.replace(value, REDACTED)
    for name, pattern in SECRET_PATTERNS.items():
        if name == "private key":
            text = PEM_BLOCK.sub(f"{REDACTED} (private key)", text)
        elif pattern.groups >= 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact(obj: Any, known: Iterable[str] = ()) -> Any:
    """A copy of ``obj`` (dicts, lists, strings) with secrets replaced by ``***``.

    Values under keys such as ``password``/``secret``/``token`` are replaced whole; strings
    elsewhere are scanned for AWS keys, private keys and the ``known`` secret values.
    """
    known = [k for k in known if k]
    if isinstance(obj, Mapping):
        return {
            key: REDACTED if _secret_scalar(key, value) else redact(value, known)
            for key, value in obj.items()
        }
    if isinstance(obj, list | tuple):
        return type(obj)(redact(item, known) for item in obj)
    if isinstance(obj, str):
        return redact_text(obj, known)
    return obj


def _secret_scalar(key: object, value: object) -> bool:
    return (
        isinstance(key, str)
        and SECRET_KEY.search(key) is not None
        and isinstance(value, str | bytes | int | float)
        and not isinstance(value, bool)
        and value not in ("", b"")
    )


@dataclass(frozen=True, slots=True)
class Finding:
    """A credential found in a file."""

    path: Path
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}"


def find_secrets(text: str, known: Iterable[str] = ()) -> list[tuple[int, str]]:
    """(line, kind) of each credential-looking thing in ``text``."""
    found: list[tuple[int, str]] = []
    known = [k for k in known if k and len(k) >= 8]
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, name) for name, p in SECRET_PATTERNS.items() if p.search(line)]
        found += [(number, "a known credential value") for value in known if value in line]
    return found


def current_aws_secrets() -> list[str]:
    """The secret parts of the credentials the standard AWS chain would use (for scans)."""
    try:
        import boto3
    except ImportError:
        return []
    credentials = boto3.Session().get_credentials()
    if credentials is None:
        return []
    frozen = credentials.get_frozen_credentials()
    return [v for v in (frozen.secret_key, frozen.token, frozen.access_key) if v]


def scan_for_secrets(folder: str | Path, known: Iterable[str] = ()) -> list[Finding]:
    """Every credential-looking line in the files under ``folder`` (binary files skipped)."""
    known = list(known)
    findings: list[Finding] = []
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue
        text = data.decode("utf-8", "replace")
        findings += [Finding(path, line, kind) for line, kind in find_secrets(text, known)]
    return findings


def make_private_dir(path: str | Path) -> Path:
    """Create ``path`` (and parents) and make it user-only (0700), also when it existed."""
    path = Path(path).expanduser()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to a new or existing file readable by the user only (0600)."""
    path = Path(path).expanduser()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return path


def copy_private(source: str | Path, target: str | Path) -> Path:
    """Copy ``source`` to ``target`` (its folders made user-only), readable by the user only;
    written under a temporary name and renamed, so a reader never sees half a file."""
    target = Path(target).expanduser()
    make_private_dir(target.parent)
    partial = target.with_name(f".{target.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out, 16 << 20)
    os.replace(partial, target)
    return target


def is_private(path: str | Path) -> bool:
    """True when neither group nor others have any permission on ``path``."""
    mode = Path(path).stat().st_mode
    return not mode & (stat.S_IRWXG | stat.S_IRWXO)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts credentials from messages before any handler sees them."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        super().__init__()
        self.known = [k for k in known if k]

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the message in place; never drops a record."""
        message = record.getMessage()
        cleaned = redact_text(message, self.known)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
