"""Named registries of tasks, metrics and models, with helpful lookup errors."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(LookupError):
    """A user asked for a name that no registry entry has."""

    def __init__(self, kind: str, name: str, choices: list[str]) -> None:
        close = difflib.get_close_matches(name, choices, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        super().__init__(f"unknown {kind} '{name}'{hint} (choices: {', '.join(choices)})")
        self.kind, self.name, self.choices = kind, name, choices


class Registry(Generic[T]):
    """An ordered mapping from unique names to entries of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._entries[name] = entry
        return entry

    def alias(self, old: str, name: str) -> None:
        """Let the former name `old` of entry `name` still find it (results files written before a rename)."""
        self.get(name)
        if old in self._entries or old in self._aliases:
            raise ValueError(f"{self.kind} '{old}' is already a name")
        self._aliases[old] = name

    def canonical(self, name: str) -> str:
        """The entry's current name, for a current or a former name."""
        return self._aliases.get(name, name)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of `add`."""
        return lambda entry: self.add(name, entry)

    def get(self, name: str) -> T:
        try:
            return self._entries[self.canonical(name)]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.names()) from None

    def names(self) -> list[str]:
        return list(self._entries)

    def resolve(self, spec: str) -> list[str]:
        """Names from a comma-separated list, where `all` means every entry; each name is checked."""
        names = self.names() if spec.strip() == "all" else [s.strip() for s in spec.split(",") if s.strip()]
        if not names:
            raise UnknownNameError(self.kind, spec, self.names())
        for name in names:
            self.get(name)
        return list(dict.fromkeys(self.canonical(name) for name in names))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)
