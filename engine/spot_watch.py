"""Spot interruption watcher on a node: polls instance metadata, prints a `spot_notice` event.

``python -m engine.spot_watch [--url URL] [--interval S]`` asks the EC2 instance metadata
service (IMDSv2: a session token first, IMDSv1 when tokens are refused) for
``latest/meta-data/spot/instance-action`` every ``S`` seconds. 404 means no notice; a notice
(``{"action": "terminate", "time": "..."}``) is printed once as a ``spot_notice`` event line and
the watcher exits 0. The launcher then asks rank 0 for a checkpoint and moves the run off the
node before AWS reclaims it (two minutes after the notice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from engine.events import Emitter, StreamSink

DEFAULT_URL = "http://169.254.169.254"
"""The instance metadata service of every EC2 instance."""
TOKEN_TTL_S = 21600
TIMEOUT_S = 2.0


def _token(url: str) -> str | None:
    """An IMDSv2 session token, or None when the service does not hand them out."""
    request = urllib.request.Request(
        f"{url}/latest/api/token",
        method="PUT",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            return str(reply.read().decode().strip()) or None
    except (urllib.error.URLError, OSError):
        return None


def poll_once(url: str, token: str | None) -> dict[str, str] | None:
    """The interruption notice, or None when there is none (404); raises OSError when the
    metadata service cannot be reached."""
    headers = {"X-aws-ec2-metadata-token": token} if token else {}
    request = urllib.request.Request(
        f"{url}/latest/meta-data/spot/instance-action", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            body = reply.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise OSError(f"metadata answered HTTP {exc.code}") from None
    try:
        data = json.loads(body)
    except ValueError:
        data = {"action": body.strip()[:100]}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def watch(url: str, interval: float, emitter: Emitter) -> int:
    """Poll until a notice arrives; emit it and return 0."""
    token, warned, token_at = _token(url), False, time.monotonic()
    while True:
        if time.monotonic() - token_at > TOKEN_TTL_S / 2:
            token, token_at = _token(url), time.monotonic()
        try:
            notice = poll_once(url, token)
        except OSError as exc:
            if not warned:  # once: a node outside EC2 has no metadata service
                print(f"spot watch: cannot read {url} ({exc}); still polling", flush=True)
                warned = True
            notice = None
        if notice is not None:
            emitter.emit("spot_notice", action=notice.get("action"), at=notice.get("time"))
            return 0
        time.sleep(interval)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags and watch."""
    parser = argparse.ArgumentParser(prog="python -m engine.spot_watch", description=__doc__)
    parser.add_argument("--url", default=DEFAULT_URL, help="metadata service base URL")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    args = parser.parse_args(argv)
    emitter = Emitter(StreamSink(sys.stdout), node=os.environ.get("SENTITOP_NODE"))
    try:
        return watch(args.url.rstrip("/"), max(0.1, args.interval), emitter)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
