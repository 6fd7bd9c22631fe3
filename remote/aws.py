"""boto3 session/client factory: standard credential chain, optional endpoint override, errors.

Credentials come only from boto3's standard chain (environment, shared config/credentials
files, SSO, container or instance roles); sentitop never reads, stores or logs them. The one
difference between real AWS and a local fake (moto) is the endpoint URL, taken from the
``endpoint_url`` argument (a profile value) or the ``SENTITOP_AWS_ENDPOINT_URL`` variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from engine.errors import CloudError

ENDPOINT_ENV = "SENTITOP_AWS_ENDPOINT_URL"
"""Environment variable naming an endpoint (e.g. a moto server) for every AWS service."""

RUN_ID_TAG = "sentitop:run-id"
"""Tag key put on every EC2 instance and EMR cluster a run starts (value: the run id)."""

DEFAULT_REGION = "us-east-1"
"""Region used when neither the caller nor the AWS configuration names one."""

_RETRIES = Config(
    retries={"mode": "standard", "max_attempts": 6},
    connect_timeout=10,
    read_timeout=60,
    user_agent_extra="sentitop",
)

# Access key ids (AKIA…/ASIA…), 40-character secrets after a key word, session tokens.
_SECRET_PATTERNS = [
    re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b"),
    re.compile(
        r"(?i)(aws_secret_access_key|secret_access_key|secretaccesskey|aws_session_token|"
        r"session_token|x-amz-security-token|signature|credential)(\s*[=:]\s*|\")([^\s,;&\"']+)"
    ),
]


def endpoint_url(explicit: str | None = None) -> str | None:
    """The endpoint to use: ``explicit`` (a profile value), else $SENTITOP_AWS_ENDPOINT_URL.

    None means the real AWS endpoints (botocore still honours its own ``AWS_ENDPOINT_URL``).
    """
    value = explicit or os.environ.get(ENDPOINT_ENV) or None
    return value.rstrip("/") if value else None


def session(region: str | None = None) -> boto3.Session:
    """A boto3 session over the standard credential chain (``AWS_PROFILE`` is honoured)."""
    return boto3.Session(region_name=region or None)


def region_of(sess: boto3.Session, region: str | None = None) -> str:
    """``region``, else the session's configured region, else :data:`DEFAULT_REGION`."""
    return region or sess.region_name or DEFAULT_REGION


def client(
    service: str,
    region: str | None = None,
    *,
    endpoint: str | None = None,
    sess: boto3.Session | None = None,
) -> Any:
    """A boto3 client for ``service`` with retries, in ``region``, at the resolved endpoint."""
    sess = sess or session(region)
    kwargs: dict[str, Any] = {"region_name": region_of(sess, region), "config": _RETRIES}
    url = endpoint_url(endpoint)
    if url:
        kwargs["endpoint_url"] = url
    with cloud_errors(f"create a {service} client"):
        return sess.client(service, **kwargs)


def require_credentials(action: str, region: str | None = None) -> None:
    """Fail now, as :func:`cloud_errors` words it, when the standard chain holds no credentials
    (a local look-up, no network): before hours of local work that ends needing AWS."""
    with cloud_errors(action, region=region):
        if session(region).get_credentials() is None:
            raise NoCredentialsError()


def redact(text: str) -> str:
    """``text`` with anything that looks like an AWS key id, secret or token masked."""
    text = _SECRET_PATTERNS[0].sub("[REDACTED]", text)
    return _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError`` (None for other exceptions)."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


@contextmanager
def cloud_errors(action: str, *, region: str | None = None) -> Iterator[None]:
    """Turn botocore failures inside the block into a :class:`CloudError` about ``action``.

    The message says what was attempted and what to do; it never contains credentials.
    """
    where = f" in {region}" if region else ""
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CloudError(
            f"could not {action}{where}: no AWS credentials found",
            hint="configure the standard AWS chain (aws configure, AWS_PROFILE, SSO or an "
            "instance role); sentitop never takes keys in profiles",
        ) from exc
    except NoRegionError as exc:
        raise CloudError(
            f"could not {action}: no AWS region", hint="set `region:` in the profile"
        ) from exc
    except EndpointConnectionError as exc:
        raise CloudError(
            f"could not {action}{where}: endpoint unreachable ({redact(str(exc))})",
            hint=f"check the network, the region, or ${ENDPOINT_ENV} if you set it",
        ) from exc
    except ClientError as exc:
        err = exc.response.get("Error", {})
        code = err.get("Code", "Error")
        message = redact(str(err.get("Message", "")))
        hint = None
        if code in {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"}:
            hint = "the AWS identity in use lacks this permission; grant it or use another"
        elif code in {
            "AuthFailure",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "RequestExpired",
        }:
            hint = "refresh or fix the AWS credentials of the standard chain"
        elif code in {
            "InsufficientInstanceCapacity",
            "SpotMaxPriceTooLow",
            "MaxSpotInstanceCountExceeded",
            "InstanceLimitExceeded",
            "VcpuLimitExceeded",
        }:
            hint = "try another instance type, zone or region, on-demand, or ask for a quota"
        raise CloudError(f"could not {action}{where}: {code}: {message}", hint=hint) from exc
    except BotoCoreError as exc:
        raise CloudError(f"could not {action}{where}: {redact(str(exc))}") from exc
    except ResponseParserError as exc:  # a proxy's or a fake's HTML page, not an AWS answer
        raise CloudError(
            f"could not {action}{where}: the endpoint's answer is not AWS's "
            f"({redact(str(exc))[:200]})",
            hint=f"check ${ENDPOINT_ENV} or any proxy between here and AWS",
        ) from exc
