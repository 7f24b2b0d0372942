"""Environment switches of an in-process side: set while its factory runs and around every call
into the target it returns, removed around the baseline's (a target should read its switches
when it is created)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any


class EnvScope:
    """Set and remove environment variables for a block, then restore them (in-process sides)."""

    def __init__(self, set_: Mapping[str, str], unset: Sequence[str] = ()) -> None:
        self.set_, self.unset = dict(set_), tuple(unset)
        self._saved: dict[str, str | None] = {}

    @property
    def empty(self) -> bool:
        return not self.set_ and not self.unset

    def __enter__(self) -> EnvScope:
        for name in (*self.set_, *self.unset):
            self._saved.setdefault(name, os.environ.get(name))
        for name in self.unset:
            os.environ.pop(name, None)
        os.environ.update(self.set_)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved = {}


class EnvScopedTarget:
    """A target whose every method call runs inside its side's environment switches (attributes
    that are not callable are passed through). Only used when the manifest has env switches."""

    def __init__(self, target: Any, scope: EnvScope) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_scope", scope)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        scope = self._scope

        def call(*args: Any, **kwargs: Any) -> Any:
            with EnvScope(scope.set_, scope.unset):
                return value(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)
