"""remote.aws: the endpoint override, credential-free errors and redaction."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, NoCredentialsError

from engine.errors import CloudError
from remote import aws
from tests.remote.aws.conftest import FAKE_KEY_ID, FAKE_SECRET, REGION


def test_endpoint_from_argument_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(aws.ENDPOINT_ENV, raising=False)
    assert aws.endpoint_url() is None
    monkeypatch.setenv(aws.ENDPOINT_ENV, "http://127.0.0.1:5000/")
    assert aws.endpoint_url() == "http://127.0.0.1:5000"
    assert aws.endpoint_url("http://other:1") == "http://other:1"


def test_clients_talk_to_the_override_and_use_the_standard_chain(aws_env: str) -> None:
    ec2 = aws.client("ec2", REGION)
    assert ec2.meta.endpoint_url == aws_env
    assert ec2.meta.region_name == REGION
    assert ec2.describe_regions()["Regions"]  # answered by moto, signed with the env chain


def test_redact_masks_keys_secrets_and_tokens() -> None:
    text = (
        f"key {FAKE_KEY_ID} aws_secret_access_key={FAKE_SECRET} "
        "X-Amz-Security-Token: abc/def+ghi Credential=AKIAABCDEFGHIJKLMNOP/2026"
    )
    masked = aws.redact(text)
    assert FAKE_KEY_ID not in masked and FAKE_SECRET not in masked
    assert "abc/def+ghi" not in masked and "AKIAABCDEFGHIJKLMNOP" not in masked
    assert masked.count("[REDACTED]") >= 3


def test_cloud_errors_name_the_action_and_say_what_to_do() -> None:
    with pytest.raises(CloudError) as info, aws.cloud_errors("start 2 g5.xlarge"):
        raise NoCredentialsError()
    assert "start 2 g5.xlarge" in info.value.message
    assert "standard AWS chain" in (info.value.hint or "")

    denied = ClientError(
        {"Error": {"Code": "UnauthorizedOperation", "Message": f"not allowed for {FAKE_KEY_ID}"}},
        "RunInstances",
    )
    with pytest.raises(CloudError) as info, aws.cloud_errors("run", region="eu-west-1"):
        raise denied
    assert "UnauthorizedOperation" in info.value.message and "eu-west-1" in info.value.message
    assert FAKE_KEY_ID not in info.value.user_message()
    assert "permission" in (info.value.hint or "")


def test_an_answer_that_is_not_awss_is_a_cloud_error() -> None:
    """A 500 HTML page (a proxy, a fake endpoint) reached the user as a botocore traceback."""
    from botocore.parsers import ResponseParserError

    with pytest.raises(CloudError) as info, aws.cloud_errors("list instances", region="mars-1"):
        raise ResponseParserError("Unable to parse response: b'<!doctype html>'")
    assert info.value.message.startswith("could not list instances in mars-1: the endpoint's")
    assert aws.ENDPOINT_ENV in (info.value.hint or "")


@pytest.mark.parametrize("command", [["prices"], ["teardown", "some-run"]])
def test_a_bad_region_flag_is_a_usage_error(command: list[str], capsys) -> None:  # type: ignore[no-untyped-def]
    from tui.cli import main

    with pytest.raises(SystemExit) as info:
        main([*command, "--region", "us-east-1[bold]"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --region: 'us-east-1[bold]' is not an AWS region name" in err
    assert "Traceback" not in err


def test_live_prices_from_an_endpoint_without_the_pricing_api_warn_in_one_line(
    aws_env: str, tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """moto's server has no Pricing API: its 500 page came out as 5 lines of HTML in the
    warning ("AWS refused: 500: <!doctype html><html lang=en><title>…")."""
    from tui.cli import main

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTITOP_AWS_ENDPOINT_URL", aws_env)
    assert main(["prices", "--refresh"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "live prices" in line]
    assert warned and all("<" not in line and "html" not in line.lower() for line in warned)
