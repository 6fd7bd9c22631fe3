"""Command-line flags generated from the config dataclasses: names, types, choices and help.

A setting is declared once, as a field of a config dataclass with a docstring under it
(:mod:`engine.config`). ``--field-name`` flags are made from those fields — type from the
annotation, choices from a ``Literal``, help from the docstring and the default — so a new
setting needs no second declaration, and a flag cannot drift from the field it sets.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from engine.config import type_hints

Parser = argparse.ArgumentParser | argparse._ArgumentGroup


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass ``cls`` (one line, whitespace collapsed)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def flag_name(name: str, prefix: str = "") -> str:
    """``--prefix-field-name`` for field ``field_name``."""
    return "--" + (prefix + name).replace("_", "-")


def _unwrap_optional(kind: Any) -> Any:
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, __import__("types").UnionType):
        return args[0] if len(args) == 1 else kind
    return kind


def _literal_or(kind: Any) -> tuple[list[str], Any]:
    """(literal choices, other type) of ``float | Literal['auto', 'none']`` and the like."""
    if typing.get_origin(kind) is Literal:
        return [str(v) for v in typing.get_args(kind)], None
    choices: list[str] = []
    other = None
    for arg in typing.get_args(kind) or (kind,):
        if typing.get_origin(arg) is Literal:
            choices += [str(v) for v in typing.get_args(arg)]
        elif arg is not type(None):
            other = arg
    return choices, other


def _mixed_type(choices: list[str], other: Callable[[str], Any], flag: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if text in choices:
            return text
        try:
            return other(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} {text!r}: expected {', '.join(choices)} or a number"
            ) from None

    return parse


def flaggable(cls: type, skip: Iterable[str] = ()) -> list[str]:
    """Fields of ``cls`` that can be flags: scalars, not nested configs, lists or mappings."""
    hints = type_hints(cls)
    names = []
    for f in dataclasses.fields(cls):
        kind = _unwrap_optional(hints[f.name])
        container = typing.get_origin(kind) in (dict, list) or kind in (dict, list)
        if f.name in skip or dataclasses.is_dataclass(kind) or container:
            continue
        names.append(f.name)
    return names


def add_config_flags(
    parser: Parser,
    cls: type,
    *,
    prefix: str = "",
    skip: Iterable[str] = (),
    only: Iterable[str] | None = None,
    aliases: Mapping[str, str] | None = None,
    required: Iterable[str] = (),
) -> None:
    """Add a flag per scalar field of ``cls``; each defaults to None (= keep the config's value).

    ``skip`` or ``only`` choose fields; ``aliases`` adds a second, shorter spelling (field →
    ``--flag``); ``required`` fields must be given. The dest of each flag is ``prefix + field``.
    """
    hints, docs = type_hints(cls), field_docs(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    must = set(required)
    chosen = flaggable(cls, skip)
    if only is not None:
        chosen = [name for name in chosen if name in set(only)]
    for name in chosen:
        kind = _unwrap_optional(hints[name])
        flag = flag_name(name, prefix)
        names = [a for a in [(aliases or {}).get(name)] if a] + [flag]
        # a docstring's "None = all cores" is the config's: on the command line it is the
        # default when the flag is not given (`--workers None` is no value to type)
        help_text = docs.get(name, "").replace("%", "%%").replace("None = ", "not given: ")
        default = defaults[name]
        if name not in must and default is not dataclasses.MISSING and default is not None:
            help_text += f" (default: {default})"
        kwargs: dict[str, Any] = {"dest": prefix + name, "default": None, "help": help_text}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            choices, other = _literal_or(kind)
            if choices and other is None:
                kwargs["choices"] = choices
            elif choices:
                kwargs["type"] = _mixed_type(choices, other, flag)
                kwargs["metavar"] = "{" + ",".join(choices) + "}|NUMBER"
            else:
                kwargs["type"] = kind
            kwargs["required"] = name in must
        parser.add_argument(*names, **kwargs)


def flag_values(args: argparse.Namespace, cls: type, *, prefix: str = "") -> dict[str, Any]:
    """The fields of ``cls`` whose flags were given (not None), by field name."""
    values = {}
    for name in flaggable(cls):
        value = getattr(args, prefix + name, None)
        if value is not None:
            values[name] = value
    return values
