"""Profiles: shipped files validate; bad ones say file:line: field: what is allowed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.config import BalanceConfig, PreprocessConfig, TrainConfig
from engine.errors import ProfileError
from remote.pricing import load_bundled_catalog
from remote.profile import (
    EC2Profile,
    LocalProfile,
    SSHProfile,
    check_profile_file,
    list_profiles,
    load_profile,
    resolve_profile_path,
)
from remote.profile_spec import BalanceSpec, PreprocessSpec, TrainSpec

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "profiles"


@pytest.fixture(autouse=True)
def _no_user_prices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own price cache and override file never leak into these tests."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "price-cache"))
    monkeypatch.setenv("SENTITOP_PRICES_FILE", str(tmp_path / "no-user-prices.csv"))


SHIPPED = ["local", "ssh-loopback", "aws-g5-2node", "aws-mixed-g4dn-g5", "aws-seed-g3"]


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return info.value.message


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_validate(name: str) -> None:
    profile = load_profile(PROFILES / f"{name}.yaml")
    assert profile.name == name
    assert profile.source == PROFILES / f"{name}.yaml"
    assert profile.world_size() >= 1


def test_shipped_profile_kinds() -> None:
    assert isinstance(load_profile(PROFILES / "local.yaml"), LocalProfile)
    loopback = load_profile(PROFILES / "ssh-loopback.yaml")
    assert isinstance(loopback, SSHProfile)
    assert [n.host for n in loopback.nodes] == ["127.0.0.2", "127.0.0.3"]
    assert not loopback.insecure_ignore_host_keys
    mixed = load_profile(PROFILES / "aws-mixed-g4dn-g5.yaml")
    assert isinstance(mixed, EC2Profile)
    assert len({g.instance_type for g in mixed.nodes}) == 2  # heterogeneous
    assert mixed.train.balance.enabled


def test_seed_profile_warns_about_unsupported_gpus_and_others_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the keys the shipped profiles name, present
    for key in (".ssh/sentitop.pem", ".config/sentitop/loopback/id_ed25519"):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text("key")
    entries = {e.path.stem: e for e in list_profiles(PROFILES)}
    assert set(SHIPPED) <= set(entries)
    seed = entries["aws-seed-g3"]
    assert seed.ok
    assert any("M60" in w and "PyTorch" in w for w in seed.warnings)
    for name in ("local", "aws-g5-2node", "aws-mixed-g4dn-g5", "ssh-loopback"):
        assert entries[name].ok and entries[name].warnings == [], entries[name].warnings


def test_a_missing_key_file_is_a_warning_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile showed "✓ valid" and a run then stopped at once with exit 2."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no keys there
    entries = {e.path.stem: e for e in list_profiles(PROFILES)}
    for name in ("aws-g5-2node", "ssh-loopback"):
        (warning,) = entries[name].warnings
        assert entries[name].ok and "nodes[0].key:" in warning and "is not a file here" in warning
    assert entries["local"].warnings == []


def test_name_lookup_uses_profiles_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTITOP_PROFILES_DIR", str(PROFILES))
    assert resolve_profile_path("local") == PROFILES / "local.yaml"
    assert load_profile("aws-g5-2node").name == "aws-g5-2node"


BAD_CASES = [
    (  # wrong type deep in a list, with the line of the key
        """
        name: two
        provider: ssh
        nodes:
          - host: a
          - host: b
            gpus: two
        data: {synthetic: {size: 1MB}}
        """,
        6,
        "nodes[1].gpus",
        "valid integer",
    ),
    (  # unknown key lists what is allowed
        """
        name: x
        provider: ssh
        nodes:
          - host: a
            gpu: 1
        data: {synthetic: {size: 1MB}}
        """,
        5,
        "nodes[0].gpu",
        "allowed here: name, host, port",
    ),
    (
        """
        name: x
        provider: local
        data: {synthetic: {size: 1MB}}
        train:
          balancer:
            measure: backward
        """,
        6,
        "train.balancer.measure",
        "'fwd_bwd' or 'forward'",
    ),
    (
        """
        name: x
        provider: gcp
        data: {synthetic: {size: 1MB}}
        """,
        2,
        "provider",
        "local, ssh, ec2",
    ),
    (
        """
        name: x
        provider: ec2
        nodes:
          - count: 2
        data: {synthetic: {size: 1MB}}
        """,
        4,
        "nodes[0].instance_type",
        "required",
    ),
    (
        """
        name: x
        provider: local
        data:
          inputs: [a.json]
          synthetic: {size: 1MB}
        """,
        3,
        "data",
        "exactly one",
    ),
    (
        """
        name: x
        provider: ssh
        nodes: [{host: a}]
        data: {synthetic: {size: 1MB}}
        train:
          nproc: 2
        """,
        5,
        "train",
        "provider local only",
    ),
    (
        """
        name: x
        provider: local
        data: {synthetic: {size: lots}}
        """,
        3,
        "data.synthetic.size",
        "30MB",
    ),
    (
        """
        name: x
        provider: local
        data: {synthetic: {size: 1MB}}
        train:
          epochs: 1
          epochs: 2
        """,
        6,
        "train.epochs",
        "twice",
    ),
    (
        """
        name: x
        provider: ssh
        nodes: [{host: "a; rm -rf ~"}]
        data: {synthetic: {size: 1MB}}
        """,
        3,
        "nodes[0].host",
        "allowed form",
    ),
    (
        """
        name: x
        provider: ssh
        workdir: "/tmp/a\\nrm -rf ~"
        nodes: [{host: a}]
        data: {synthetic: {size: 1MB}}
        """,
        3,
        "workdir",
        "allowed form",
    ),
    (
        """
        name: x
        provider: local
        data: {inputs: [s3://b/x.gz]}
        preprocess:
          runner: emr
        """,
        4,
        "preprocess",
        "emr.s3",
    ),
    (
        """
        name: x
        provider: local
        data: {synthetic: {size: 5KB}}
        """,
        3,
        "data.synthetic.size",
        "greater than or equal to 10000",
    ),
    (  # a YAML boolean is no process count, and a quoted number is text
        """
        name: x
        provider: local
        data: {synthetic: {size: 1MB}}
        train: {nproc: true}
        """,
        4,
        "train.nproc",
        "a valid integer (got True)",
    ),
    (
        """
        name: x
        provider: local
        data: {synthetic: {size: 1MB}}
        train:
          epochs: "3"
        """,
        5,
        "train.epochs",
        "a valid integer (got '3')",
    ),
]


@pytest.mark.parametrize(("text", "line", "field", "allowed"), BAD_CASES)
def test_bad_profile_names_file_line_field_and_what_is_allowed(
    tmp_path: Path, text: str, line: int, field: str, allowed: str
) -> None:
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert allowed in message
    assert "Traceback" not in message


def test_a_bad_profile_points_at_an_example_that_exists_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint read "profiles/local.yaml is a working example", a path that exists only in a
    checkout's top folder."""
    path = write(tmp_path, "name: x\nprovider: local\ndata: {synthetic: {size: 1MB}}\nbogus: 1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    example = Path(str(caught.value.hint).split(" is a working example")[0])
    assert example.is_absolute() and example.is_file()
    assert load_profile(example).name == "local"


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: x
        provider: ssh
        nodes:
          - host: a
            port: 99999
        data: {synthetic: {size: 1MB}}
        budget: {max_usd: -1}
        """,
    )
    message = error_of(path)
    assert message.splitlines()[0] == f"{path}: 2 problems"
    assert f"{path}:5: nodes[0].port" in message
    assert f"{path}:7: budget.max_usd" in message


def test_yaml_syntax_error_and_non_mapping(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "name: x\nprovider: [local\n"))
    assert "not valid YAML" in message and str(tmp_path) in message
    assert "(while parsing a flow sequence that starts on line 2)" in message  # the slip's line
    assert "a mapping of fields" in error_of(write(tmp_path, "- just\n- a list\n", "l.yaml"))


def test_aliases_that_contain_themselves_or_explode_are_errors(tmp_path: Path) -> None:
    """`a: &a [*a]` gave a RecursionError traceback in `profiles`, `run` and `plan` (and hid
    every profile of its folder in the dashboard); an alias bomb of 10 aliases per level
    never finished. Aliases a profile really uses still read."""
    looped = error_of(write(tmp_path, "name: x\nprovider: local\na: &a [1, *a]\n"))
    assert "p.yaml:3: " in looped and "an alias refers to the value that contains it" in looped
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = error_of(write(tmp_path, "name: x\nprovider: local\n" + "\n".join(levels) + "\n"))
    assert "aliases expand to more than 100,000 values" in bomb
    shared = "name: x\nprovider: local\ndata: &d {synthetic: {size: 1MB}}\nx-copy: *d\n"
    other = error_of(write(tmp_path, shared, "shared.yaml"))  # another problem: x-copy
    assert "an alias refers" not in other and "expand to" not in other and "x-copy" in other
    entries = list_profiles(tmp_path)
    assert all(e.error for e in entries)  # each file has its own error; the listing lives


def test_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    assert "no such profile file" in error_of(tmp_path / "nope.yaml")


def test_list_profiles_keeps_errors_per_file(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text((PROFILES / "local.yaml").read_text())
    write(tmp_path, "name: bad\nprovider: local\n", "bad.yaml")
    (tmp_path / "notes.txt").write_text("ignored")
    entries = list_profiles(tmp_path)
    assert [e.path.name for e in entries] == ["bad.yaml", "good.yaml"]
    bad, good = entries
    assert not bad.ok and bad.error and bad.problems[0].path == "data"
    assert "required" in bad.problems[0].message
    assert good.ok and good.profile is not None and good.error is None


def test_local_profile_converts_into_engine_configs(tmp_path: Path) -> None:
    profile = load_profile(PROFILES / "local.yaml")
    with pytest.raises(ValueError, match="synthetic"):
        profile.to_preprocess_config(tmp_path / "data")
    pre = profile.to_preprocess_config(tmp_path / "data", inputs=["reviews.json"])
    assert isinstance(pre, PreprocessConfig)
    assert pre.inputs == ["reviews.json"] and pre.output == str(tmp_path / "data")
    assert (pre.vocab_size, pre.seq_len) == (
        profile.preprocess.vocab_size,
        profile.preprocess.seq_len,
    )
    train = profile.to_train_config(tmp_path / "data", tmp_path / "run")
    assert isinstance(train, TrainConfig)
    assert train.epochs == profile.train.epochs and train.batch_size == profile.train.batch_size
    assert train.run_dir == str(tmp_path / "run")
    # unset fields keep the engine defaults
    defaults = TrainConfig(data_dir="d", run_dir="r")
    assert profile.train.loss_threshold is None and profile.train.optimizer is None
    assert (train.loss_threshold, train.optimizer) == (defaults.loss_threshold, defaults.optimizer)
    assert profile.world_size() == profile.train.nproc == 2
    assert profile.data.synthetic is not None and profile.data.synthetic.size == 30_000_000


def test_train_section_passes_balancer_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where its inputs are (a missing one is a warning)
    for name in ("a.json", "b.json.gz"):
        (tmp_path / name).write_text("")
    path = write(
        tmp_path,
        """
        name: bal
        provider: local
        data: {inputs: [a.json, b.json.gz]}
        train:
          model: {preset: seed, hidden: 48}
          lr_reference_batch: 512  # docs/scaling.md names it; it was refused as unknown
          clip_grad_norm: 0.5
          balancer:
            enabled: true
            every_epochs: 2
            every_steps: 50
            straggle: {1: 2.5}
          nproc: 2
        """,
    )
    profile = load_profile(path)
    config = profile.to_train_config("d", "r")
    assert config.balance == BalanceConfig(
        enabled=True, every_epochs=2, every_steps=50, straggle={1: 2.5}
    )
    assert config.model.preset == "seed" and config.model.hidden == 48
    assert config.lr_reference_batch == 512 and config.clip_grad_norm == 0.5
    assert profile.to_preprocess_config("out").inputs == ["a.json", "b.json.gz"]
    assert profile.warnings() == []


def test_straggle_rank_outside_world_is_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: w
        provider: local
        data: {synthetic: {size: 1MB}}
        train: {nproc: 2, balancer: {straggle: {5: 2.0}}}
        """,
    )
    assert any("rank 5" in w for w in check_profile_file(path).warnings)


def test_insecure_host_keys_must_be_explicit_and_warns(tmp_path: Path) -> None:
    base = "name: s\nprovider: ssh\nnodes: [{host: a}]\ndata: {synthetic: {size: 1MB}}\n"
    assert not load_profile(write(tmp_path, base, "a.yaml")).insecure_ignore_host_keys
    entry = check_profile_file(
        write(tmp_path, base + "insecure_ignore_host_keys: true\n", "b.yaml")
    )
    assert entry.ok and any("not checked" in w for w in entry.warnings)


def test_ec2_world_size_uses_catalog_gpus() -> None:
    catalog = load_bundled_catalog()
    profile = load_profile(PROFILES / "aws-mixed-g4dn-g5.yaml")
    assert isinstance(profile, EC2Profile)
    expected = sum(g.count * max(1, catalog.specs(g.instance_type).gpus) for g in profile.nodes)
    assert profile.world_size(catalog) == expected


def _documented_default(description: str) -> str | None:
    match = re.search(r"default:? ([\w.]+)\)", description)
    return match.group(1) if match else None


@pytest.mark.parametrize(
    ("spec", "engine", "renames"),
    [
        (TrainSpec, TrainConfig, {}),
        (BalanceSpec, BalanceConfig, {}),
        (PreprocessSpec, PreprocessConfig, {}),
    ],
)
def test_documented_defaults_match_the_engine(spec: type, engine: type, renames: dict) -> None:
    fields = {f.name: f for f in dataclasses.fields(engine)}
    checked = 0
    for name, info in spec.model_fields.items():
        documented = _documented_default(info.description or "")
        target = fields.get(renames.get(name, name))
        if documented is None or target is None or target.default is dataclasses.MISSING:
            continue
        default = target.default
        if isinstance(default, int | float) and not isinstance(default, bool):
            assert float(documented) == default, (name, documented, default)
        else:
            assert str(default).lower() == documented.lower(), (name, documented, default)
        checked += 1
    assert checked >= 3


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SENTITOP_PRICES_FILE": str(cwd / "none.csv"),
        "SENTITOP_CACHE_DIR": str(cwd / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "profiles", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_profiles_command_lists_prices_and_flags_invalid_files(tmp_path: Path) -> None:
    ok = _cli("--json", str(PROFILES), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    infos = {i["name"]: i for i in json.loads(ok.stdout)["profiles"]}
    assert set(SHIPPED) <= set(infos)
    assert infos["aws-g5-2node"]["usd_per_hour"] == pytest.approx(
        2 * load_bundled_catalog().get("g5.xlarge").on_demand_usd
    )
    assert infos["aws-seed-g3"]["warnings"] and infos["local"]["world_size"] == 2

    bad = write(tmp_path, "name: b\nprovider: local\ndata: {synthetic: {size: 1MB}}\nnodes: []\n")
    out = _cli(str(bad), str(PROFILES / "local.yaml"), cwd=tmp_path)
    assert out.returncode == 2
    assert f"{bad}:4: nodes: unknown field 'nodes'" in out.stderr
    assert "Traceback" not in out.stderr

    schema = _cli("--schema", cwd=tmp_path)
    assert schema.returncode == 0 and "SSHNodeSpec" in json.loads(schema.stdout)["$defs"]


def test_profiles_refuses_what_run_refuses_and_escapes_descriptions(tmp_path: Path) -> None:
    """An instance type with no price was "1 warning(s)", exit 0, while `run` refused the same
    file (exit 2); a description's escape bytes reached the terminal."""
    unpriced = write(tmp_path, "name: u\nprovider: local\ninstance_type: m5.nonexist\n"
                     "data: {synthetic: {size: 1MB}}\n", "u.yaml")  # fmt: skip
    out = _cli(str(unpriced), cwd=tmp_path)
    assert out.returncode == 2
    assert f"error: {unpriced}: instance_type: no price known for 'm5.nonexist'" in out.stderr
    assert "invalid" in out.stdout and "warning" not in out.stderr
    coloured = write(tmp_path, 'name: c\nprovider: local\ndescription: "a \\e[31mred\\e[0m one"\n'
                     "data: {synthetic: {size: 1MB}}\n", "c.yaml")  # fmt: skip
    shown = _cli(str(coloured), cwd=tmp_path)
    assert shown.returncode == 0 and "\x1b" not in shown.stdout
    assert "a \\x1b[31mred" in shown.stdout


def test_a_missing_input_file_is_a_warning_before_any_run(tmp_path: Path) -> None:
    """`profiles` called such a file "ok"; `run` then stopped at preprocessing."""
    there = tmp_path / "there.jsonl"
    there.write_text("")
    text = f"name: m\nprovider: local\ndata: {{inputs: [{there}, {tmp_path / 'nope.jsonl'}]}}\n"
    warnings = load_profile(write(tmp_path, text)).warnings()
    assert len(warnings) == 1 and warnings[0].startswith("data.inputs[1]: no such file")
