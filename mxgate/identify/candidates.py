"""The candidate values of every profile field: the values registered profiles use, then the
values the field's type allows (its Literal members, None for an optional field, both bools)."""

from __future__ import annotations

import types
import typing
from functools import cache

from mxgate.oracle import profiles
from mxgate.oracle.profiles import DESCRIPTIVE_FIELDS, Profile


@cache
def _hints() -> dict[str, object]:
    return typing.get_type_hints(Profile)


def semantic_fields() -> tuple[str, ...]:
    """Every field that defines behaviour, in declaration order."""
    return tuple(name for name in _hints() if name not in DESCRIPTIVE_FIELDS)


def _type_values(hint: object) -> list[object]:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return list(typing.get_args(hint))
    if hint is bool:
        return [True, False]
    if origin in (typing.Union, types.UnionType):
        return [v for arm in typing.get_args(hint) for v in ([None] if arm is type(None) else _type_values(arm))]
    return []  # a float or a tuple: only the registered values are known


def values(field: str) -> tuple[object, ...]:
    """Candidate values of ``field``, registered values first (registry order), each once."""
    if field not in _hints() or field in DESCRIPTIVE_FIELDS:
        raise ValueError(f"field must be one of {', '.join(semantic_fields())}; got {field!r}")
    seen: list[object] = []
    for name in profiles.names():
        value = getattr(profiles.get(name), field)
        if value not in seen:
            seen.append(value)
    for value in _type_values(_hints()[field]):
        if value not in seen:
            seen.append(value)
    return tuple(seen)


def show(value: object) -> str:
    """A field value as Python source (for the register call and the report)."""
    return repr(value)
