"""EC2Cluster built from the shipped ec2 profiles (names, spot prices, AMI lookup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import CloudError
from remote.cluster_factory import make_cluster
from remote.clusters.ec2 import EC2Cluster
from remote.profile import load_profile

ROOT = Path(__file__).resolve().parents[3]
MIXED = ROOT / "profiles" / "aws-mixed-g4dn-g5.yaml"


def with_ami(tmp_path: Path, source: Path = MIXED) -> Path:
    text = source.read_text().replace(
        "    key_name: sentitop\n", "    key_name: sentitop\n    ami: ami-0123456789abcdef0\n"
    )
    path = tmp_path / source.name
    path.write_text(text)
    return path


def test_mixed_profile_maps_to_groups_nodes_and_ssh_settings(tmp_path: Path) -> None:
    cluster = make_cluster(load_profile(with_ami(tmp_path)))
    assert isinstance(cluster, EC2Cluster)
    assert cluster.nodes == ["a10g-0", "t4-0", "t4-1"]
    a10g, t4 = cluster._groups
    assert (a10g.instance_type, a10g.count, a10g.spot) == ("g5.xlarge", 1, False)
    assert (t4.instance_type, t4.count, t4.spot, t4.spot_max_price) == (
        "g4dn.xlarge",
        2,
        True,
        0.526,
    )
    assert t4.key_name == "sentitop" and t4.ami == "ami-0123456789abcdef0"
    node = cluster.node("t4-1")
    assert (node.user, node.key, node.nproc) == ("ubuntu", "~/.ssh/sentitop.pem", 1)
    assert cluster.check_host_keys  # fresh instances: keys come from their console output


def test_missing_ami_uses_the_deep_learning_ami_parameter_or_says_what_to_set(aws_env) -> None:
    # moto has no public DLAMI parameter: the lookup fails with a hint naming the field
    with pytest.raises(CloudError) as info:
        make_cluster(load_profile(MIXED))
    assert "Deep Learning AMI" in info.value.message
    assert "nodes[].ami" in (info.value.hint or "")


def test_missing_credentials_are_hinted_as_such_not_as_an_ami(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from remote.clusters.ec2 import default_ami

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(CloudError) as info:
        default_ami("us-east-1")
    assert "no AWS credentials" in info.value.message
    assert "aws configure" in (info.value.hint or "") and "ami" not in (info.value.hint or "")


def test_run_without_credentials_fails_before_preprocessing(  # type: ignore[no-untyped-def]
    aws_env, monkeypatch, tmp_path: Path, capsys
) -> None:
    """An ec2 run with no credentials said so only after preprocessing (hours on a big corpus)."""
    from tui.cli import main

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    profile = tmp_path / "ec2.yaml"
    profile.write_text(
        "name: nocreds\nprovider: ec2\nregion: us-east-1\n"
        "nodes: [{instance_type: g5.xlarge, ami: ami-03cf127a}]\n"
        "data: {synthetic: {size: 1MB}}\n"
    )
    assert main(["run", str(profile), "--runs-dir", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "could not start the profile's EC2 instances in us-east-1: no AWS credentials" in err
    assert not (tmp_path / "runs").exists()  # refused before anything, its run folder too


@pytest.mark.parametrize(
    ("written", "seconds"), [("15m", 900.0), ("90s", 90.0), ("1h30m", 5400.0), ("600", 600.0)]
)
def test_ready_timeout_is_a_profile_duration_given_to_the_fleet(
    tmp_path: Path, written: str, seconds: float
) -> None:
    path = with_ami(tmp_path)
    path.write_text(path.read_text() + f"ready_timeout: {written}\n")
    profile = load_profile(path)
    assert profile.ready_timeout == seconds
    assert make_cluster(profile)._fleet_options["ready_timeout_s"] == seconds


def test_ready_timeout_unset_keeps_the_fleet_default(tmp_path: Path) -> None:
    from remote.clusters.ec2_fleet import READY_TIMEOUT_S

    cluster = make_cluster(load_profile(with_ami(tmp_path)))
    assert cluster._fleet_options["ready_timeout_s"] == READY_TIMEOUT_S == 900


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("soon", "cannot read 'soon' as a duration; give e.g. 90s, 15m, 1h30m or 900"),
        ("5s", "greater than or equal to 30"),
        ("7h", "less than or equal to 21600"),
    ],
)
def test_a_bad_ready_timeout_names_the_field_and_the_line(
    tmp_path: Path, written: str, says: str
) -> None:
    from engine.errors import ProfileError

    path = with_ami(tmp_path)
    text = path.read_text() + f"ready_timeout: {written}\n"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    line = text.count("\n")
    message = info.value.message
    assert f"{path}:{line}: ready_timeout: " in message and says in message
    assert info.value.exit_code == 2


def test_without_a_python_the_deep_learning_amis_interpreters_are_tried(tmp_path: Path) -> None:
    from remote.clusters.node_runtime import DLAMI_PYTHONS

    path = with_ami(tmp_path)
    assert make_cluster(load_profile(path)).python_candidates == DLAMI_PYTHONS
    path.write_text(path.read_text() + "python: /opt/venv/bin/python\n")
    cluster = make_cluster(load_profile(path))
    assert cluster.python_candidates == () and cluster.python("a10g-0") == "/opt/venv/bin/python"


def test_a_profile_without_ami_whose_default_cannot_be_found_fails_before_preprocessing(  # type: ignore[no-untyped-def]
    aws_env, monkeypatch, tmp_path: Path, capsys
) -> None:
    """The Deep Learning AMI was looked up after preprocessing (0.5 h for a 92 GB profile)."""
    from tui.cli import main

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    profile = tmp_path / "ec2.yaml"
    profile.write_text(
        "name: noami\nprovider: ec2\nregion: us-east-1\n"
        "nodes: [{instance_type: g5.xlarge}]\ndata: {synthetic: {size: 1MB}}\n"
    )
    assert main(["run", str(profile), "--runs-dir", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "could not look up the default Deep Learning AMI" in err and "nodes[].ami" in err
    assert not (tmp_path / "runs").exists()  # refused before a run folder
    assert not list((tmp_path / "cache").glob("**/dataset.h5"))  # and before preprocessing


@pytest.mark.parametrize("budget", ["max_usd_per_hour: 0.5", "max_usd: 0.001"])
def test_a_profile_over_its_own_budget_is_refused_before_a_run_folder(  # type: ignore[no-untyped-def]
    aws_env, monkeypatch, tmp_path: Path, capsys, budget: str
) -> None:
    """The refusal came after a "failed" run folder was made, with exit 1 (a bad profile is 2,
    with no folder)."""
    from tui.cli import main

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    profile = tmp_path / "ec2.yaml"
    profile.write_text(
        "name: pricey\nprovider: ec2\nregion: us-east-1\n"
        "nodes: [{instance_type: g5.xlarge, ami: ami-03cf127a}]\n"
        f"data: {{synthetic: {{size: 1MB}}}}\nbudget: {{{budget}}}\n"
    )
    assert main(["run", str(profile), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "budget exceeded: " in err and "not launching" in err
    assert not (tmp_path / "runs").exists()


def test_a_sweep_with_a_config_over_the_budget_is_refused_before_any_run(  # type: ignore[no-untyped-def]
    aws_env, monkeypatch, tmp_path: Path, capsys
) -> None:
    """1 × g5.xlarge fits max_usd_per_hour, 4 do not: the sweep is refused before its first
    run, not after the 1-instance run has paid for its machines."""
    from tui.cli import main

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    profile = tmp_path / "ec2.yaml"
    profile.write_text(
        "name: sweepy\nprovider: ec2\nregion: us-east-1\n"
        "nodes: [{instance_type: g5.xlarge, ami: ami-03cf127a}]\n"
        "data: {synthetic: {size: 1MB}}\nbudget: {max_usd_per_hour: 2.5}\n"
    )
    runs = tmp_path / "runs"
    assert main(["sweep", str(profile), "--nproc", "1,4", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "budget exceeded: " in err and "sweepy-np4" in err
    assert not runs.exists() or not any(runs.iterdir())
