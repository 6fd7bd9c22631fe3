"""YAML loading with line numbers, and pydantic errors turned into 'line N: a.b[1].c: what' text."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a YAML document."""

    line: int | None
    """1-based line in the file (None when it cannot be told)."""
    path: str
    """Field path such as ``nodes[1].gpus`` ('' for the whole document)."""
    message: str
    """What is wrong and what is allowed."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.path or '(document)'}: {self.message}"


class YamlSyntaxError(Exception):
    """A document that is not valid YAML, or repeats a key; carries the problems."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def load_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document's data and its node tree (for line numbers); raises YamlSyntaxError."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = str(exc.problem or exc.context)
        start = exc.context_mark
        if exc.problem and exc.context and start is not None and start.line + 1 != line:
            what += f" ({exc.context} that starts on line {start.line + 1})"  # the likely slip
        raise YamlSyntaxError([Problem(line, "", f"not valid YAML: {what}")]) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError([Problem(None, "", f"not valid YAML: {exc}")]) from None
    if (alias_problem := _alias_problem(node)) is not None:
        raise YamlSyntaxError([alias_problem])
    duplicates = list(_duplicate_keys(node, ()))
    if duplicates:
        raise YamlSyntaxError(duplicates)
    return data, node


MAX_EXPANDED_NODES = 100_000
"""Most values a document may expand to through its aliases (a profile holds a few hundred)."""


def _alias_problem(root: yaml.Node | None) -> Problem | None:
    """An alias that refers to a node containing it (the data would contain itself), or aliases
    that expand to more than MAX_EXPANDED_NODES values (an "alias bomb": reading it would
    not end); None for a document without either. Walks the node tree without recursion."""
    if root is None:
        return None
    expanded = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    inside: set[int] = set()  # the nodes on the path from the root to the current one
    while stack:
        node, leaving = stack.pop()
        if leaving:
            inside.discard(id(node))
            continue
        if id(node) in inside:
            line = node.start_mark.line + 1
            return Problem(line, "", "an alias refers to the value that contains it (the "
                           "data would contain itself); write the value out")  # fmt: skip
        expanded += 1
        if expanded > MAX_EXPANDED_NODES:
            return Problem(None, "", f"its aliases expand to more than {MAX_EXPANDED_NODES:,} "
                           "values; write the values out")  # fmt: skip
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            continue
        inside.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children))
    return None


def _duplicate_keys(node: yaml.Node | None, loc: tuple[str | int, ...]) -> typing.Iterator[Problem]:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                yield Problem(
                    key.start_mark.line + 1, format_loc((*loc, name)), "key given twice; keep one"
                )
            seen.add(name)
            yield from _duplicate_keys(value, (*loc, name))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*loc, index))


def line_of(node: yaml.Node | None, loc: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the field at ``loc`` (its key), or of its nearest existing parent."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for step in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(step)), None)
            if match is None:
                return line
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if not 0 <= step < len(node.value):
                return line
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def format_loc(loc: tuple[str | int, ...]) -> str:
    """``('nodes', 1, 'gpus')`` → ``nodes[1].gpus``."""
    text = ""
    for step in loc:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += ("." if text else "") + str(step)
    return text


def _inner_types(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _inner_types(arg)]
    return [annotation]


def _step(annotation: Any, step: str | int) -> tuple[Any, FieldInfo | None]:
    """The annotation one step down (into a model field, list item or dict value)."""
    for candidate in _inner_types(annotation):
        origin = typing.get_origin(candidate)
        if isinstance(step, int) and origin is list:
            return typing.get_args(candidate)[0], None
        if origin is dict:
            return typing.get_args(candidate)[1], None
        if (
            isinstance(candidate, type)
            and issubclass(candidate, BaseModel)
            and isinstance(step, str)
        ):
            info = candidate.model_fields.get(step)
            if info is not None:
                return info.annotation, info
    return None, None


def describe_at(
    model: type[BaseModel], loc: tuple[str | int, ...]
) -> tuple[FieldInfo | None, list[str]]:
    """The field at ``loc`` (if any) and the field names allowed in the mapping holding it."""
    annotation: Any = model
    info: FieldInfo | None = None
    for step in loc[:-1]:
        annotation, info = _step(annotation, step)
        if annotation is None:
            return None, []
    allowed: list[str] = []
    for candidate in _inner_types(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            allowed = list(candidate.model_fields)
    if loc:
        _, info = _step(annotation, loc[-1])
    return info, allowed


def problems_from(
    exc: ValidationError,
    node: yaml.Node | None,
    model: type[BaseModel],
    *,
    strip_prefix: int = 0,
) -> list[Problem]:
    """One Problem per pydantic error: line, field path, what is wrong and what is allowed.

    ``strip_prefix`` drops leading loc steps (a discriminated union's tag).
    """
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])[strip_prefix:]
        kind = error["type"]
        info, allowed = describe_at(model, loc)
        message = str(error["msg"]).removeprefix("Value error, ")
        if kind == "extra_forbidden":
            message = f"unknown field {loc[-1]!r}; allowed here: {', '.join(allowed) or 'none'}"
        elif kind == "missing":
            message = "required field is missing"
            if info is not None and info.description:
                message += f" ({_first_line(info.description)})"
        elif kind == "string_pattern_mismatch":
            message = f"{error.get('input')!r} does not have the allowed form"
            if info is not None and info.description:
                message += f"; {loc[-1]}: {_first_line(info.description)}"
        else:
            value = error.get("input")
            if not isinstance(value, dict | list) and kind not in (
                "value_error",
                "assertion_error",
            ):
                message += f" (got {value!r})"
            if info is not None and info.description:
                message += f"; {loc[-1]}: {_first_line(info.description)}"
        problems.append(Problem(line_of(node, loc), format_loc(loc), message))
    problems.sort(key=lambda p: (p.line or 0, p.path))
    return problems


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].rstrip(".")
