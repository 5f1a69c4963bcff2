"""Checking a metric's options against the types its constructor declares, so that a mistyped option
(`cc_shap.n_samples=abc`) is refused in one line before any work starts."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from typing import Any


def matches(value: Any, hint: Any) -> bool:
    """Whether `value` is of the declared type `hint` (bool is not an int here; an int is a float; a tuple or list
    is a Sequence of its item type; a string is never a Sequence of strings)."""
    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arm) for arm in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (Sequence, list, tuple):
        if not isinstance(value, list | tuple):
            return False
        item = args[0] if args else Any
        return all(matches(v, item) for v in value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def describe(hint: Any) -> str:
    """A type as a user reads it: `int`, `a list of int`, `int or None`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(arm) for arm in args)
    if hint is type(None):
        return "None"
    if origin in (Sequence, list, tuple):
        return f"a list of {describe(args[0])}" if args else "a list"
    return getattr(hint, "__name__", str(hint))


def check_options(owner: str, constructor: Callable[..., Any], options: dict[str, Any]) -> None:
    """Raise ValueError naming the first option whose value is not of the type `constructor` declares for it (and,
    for a single value where a list is declared, how the list is written)."""
    hints = typing.get_type_hints(constructor.__init__ if isinstance(constructor, type) else constructor)
    for key, value in options.items():
        if key in hints and not matches(value, hints[key]):
            hint = f"; a list is written in brackets: [{value!r}]" if matches([value], hints[key]) else ""
            raise ValueError(f"{owner} option {key} must be {describe(hints[key])}, got {value!r}{hint}")
