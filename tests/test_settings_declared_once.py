"""Each setting is declared once: profile sections and flags follow the engine's configs."""

from __future__ import annotations

import argparse
import dataclasses
import typing

import pytest

from engine.config import BalanceConfig, ModelConfig, PreprocessConfig, TrainConfig, type_hints
from engine.config_flags import field_docs, flaggable
from engine.sentiment.train import add_train_arguments, config_from_args
from remote.profile_spec import BalanceSpec, ModelSpec, PreprocessSpec, TrainSpec

PROFILE_ONLY = {"nproc", "emr"}
"""Profile fields that are launcher or provider settings, not engine settings."""


def _choices(kind: typing.Any) -> set[str]:
    found: set[str] = set()
    for arg in [kind, *typing.get_args(kind)]:
        if typing.get_origin(arg) is typing.Literal:
            found |= {str(v) for v in typing.get_args(arg)}
    return found


@pytest.mark.parametrize(
    ("spec", "config"),
    [
        (TrainSpec, TrainConfig),
        (ModelSpec, ModelConfig),
        (BalanceSpec, BalanceConfig),
        (PreprocessSpec, PreprocessConfig),
    ],
)
def test_profile_sections_use_the_engine_field_names_and_choices(spec: type, config: type) -> None:
    engine_fields = type_hints(config)
    for name, info in spec.model_fields.items():  # type: ignore[attr-defined]
        if name in PROFILE_ONLY:
            continue
        assert name in engine_fields, f"{spec.__name__}.{name} is not a {config.__name__} field"
        assert _choices(info.annotation) == _choices(engine_fields[name]), name


ENGINE_ONLY = {
    TrainConfig: {"data_dir", "run_dir", "events_file", "resume"},  # set per run by the runner
    PreprocessConfig: {"inputs", "output", "max_line_bytes"},  # data.inputs; per run; CLI only
}
"""Engine fields a profile does not set, and why."""


@pytest.mark.parametrize(
    ("spec", "config"),
    [
        (TrainSpec, TrainConfig),
        (PreprocessSpec, PreprocessConfig),
        (ModelSpec, ModelConfig),
        (BalanceSpec, BalanceConfig),
    ],
)
def test_every_engine_setting_can_be_given_in_a_profile(spec: type, config: type) -> None:
    """docs/scaling.md tells users to set `train.lr_reference_batch`, which profiles refused as
    an unknown field (as clip_grad_norm and lexicon_phrases): the CLI had them, profiles not."""
    fields = {f.name for f in dataclasses.fields(config)}
    missing = fields - set(spec.model_fields)  # type: ignore[attr-defined]
    assert missing == ENGINE_ONLY.get(config, set())


def test_every_engine_field_has_a_docstring() -> None:
    for config in (TrainConfig, ModelConfig, BalanceConfig, PreprocessConfig):
        names = {f.name for f in dataclasses.fields(config)}
        missing = names - set(field_docs(config))
        assert not missing, f"{config.__name__}: fields without a docstring: {sorted(missing)}"


def _sample(kind: typing.Any) -> tuple[str, typing.Any]:
    """A command-line value for a field type and what it should parse to."""
    if typing.get_origin(kind) is not typing.Literal:
        kind = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
    if typing.get_origin(kind) is typing.Literal:
        value = typing.get_args(kind)[-1]
        return str(value), value
    return {int: ("7", 7), float: ("0.5", 0.5), str: ("x", "x")}[kind]


def test_every_train_flag_sets_the_field_it_is_named_after() -> None:
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    hints = type_hints(TrainConfig)
    for name in flaggable(TrainConfig, skip=("data_dir", "run_dir")):
        flag = "--" + name.replace("_", "-")
        if hints[name] is bool:
            argv, expected = [flag], True
        else:
            text, expected = _sample(hints[name])
            argv = [flag, text]
        args = parser.parse_args(["--data", "d", "--run-dir", "r", *argv])
        try:
            cfg = config_from_args(args)
        except Exception as exc:  # a sample value the config refuses: still the right field
            assert name in str(exc), (name, exc)
            continue
        assert getattr(cfg, name) == expected, name
