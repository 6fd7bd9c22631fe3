"""Credentials never reach run folders: redaction, the folder scan, user-only permissions."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from engine.events import Emitter, JsonlFileSink
from remote.profile import load_profile
from remote.security import (
    REDACTED,
    RedactingFilter,
    find_secrets,
    is_private,
    make_private_dir,
    redact,
    scan_for_secrets,
    write_private_file,
)

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
ACCESS = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example key, split so scanners skip it
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----"


def test_redact_keys_patterns_and_known_values() -> None:
    data = {
        "profile": "aws-g5-2node",
        "env": {
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": "tok-123456789",
            "HOME": "/home/u",
        },
        "log": [f"using {ACCESS} now", f"aws_secret_access_key = {SECRET}", PEM],
        "password": 1234,
        "key": "~/.ssh/sentitop.pem",  # a path to a key is not a secret
        "nested": ("my-own-secret-value",),
        "count": 3,
    }
    out = redact(data, known=["my-own-secret-value"])
    assert out["env"]["AWS_SECRET_ACCESS_KEY"] == REDACTED
    assert out["env"]["AWS_SESSION_TOKEN"] == REDACTED and out["env"]["HOME"] == "/home/u"
    assert ACCESS not in out["log"][0] and SECRET not in out["log"][1]
    assert "PRIVATE KEY-----\nb3" not in out["log"][2] and REDACTED in out["log"][2]
    assert out["password"] == REDACTED and out["key"] == "~/.ssh/sentitop.pem"
    assert out["nested"] == (REDACTED,) and out["count"] == 3
    assert data["env"]["AWS_SECRET_ACCESS_KEY"] == SECRET  # the input is not modified
    assert find_secrets(repr(out), known=["my-own-secret-value"]) == []


def test_scan_finds_secrets_in_a_run_folder(tmp_path: Path) -> None:
    run = make_private_dir(tmp_path / "runs" / "r1")
    (run / "node0.log").write_text(f"start\nexport AWS_ACCESS_KEY_ID={ACCESS}\nok\n")
    (run / "notes.txt").write_text(f"the secret is {SECRET}\n")
    (run / "model.pt").write_bytes(b"\0\1" + ACCESS.encode())  # binary files are skipped
    findings = scan_for_secrets(run, known=[SECRET])
    assert [(f.path.name, f.line) for f in findings] == [("node0.log", 2), ("notes.txt", 1)]
    assert "aws access key id" in str(findings[0])


def test_a_run_folder_written_with_profile_and_events_has_no_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    run = make_private_dir(tmp_path / "run")
    profile = load_profile(PROFILES / "aws-g5-2node.yaml")
    write_private_file(run / "profile.json", str(profile.resolved()))
    emitter = Emitter(JsonlFileSink(run / "events.jsonl"), run="r")
    emitter.emit("run_start", profile=profile.name, config=redact(profile.resolved()))
    emitter.close()
    assert scan_for_secrets(run, known=[SECRET, ACCESS]) == []
    assert is_private(run) and is_private(run / "profile.json")


def test_private_dir_and_file_permissions(tmp_path: Path) -> None:
    loose = tmp_path / "existing"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    assert not is_private(loose)
    assert stat.S_IMODE(make_private_dir(loose).stat().st_mode) == 0o700
    nested = make_private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(nested.stat().st_mode) == 0o700
    key = tmp_path / "id_ed25519"
    key.write_text("old")
    key.chmod(0o644)
    write_private_file(key, PEM)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.read_text() == PEM


def test_logging_filter_redacts_messages(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("sentitop.test.redact")
    logger.addFilter(RedactingFilter(known=[SECRET]))
    with caplog.at_level(logging.INFO, logger="sentitop.test.redact"):
        logger.info("credentials %s / %s", ACCESS, SECRET)
    assert ACCESS not in caplog.text and SECRET not in caplog.text and REDACTED in caplog.text
