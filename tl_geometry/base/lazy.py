"""A callable named by a ``"module:attribute"`` string and imported when first called: how a
lower room refers to a higher one (a family's figure, reading and checks; a report's notebook
display and ``plot``) without importing it — the one kind of upward reference the layering
allows, and only by a name declared in the code (``tests/unit/house/test_import_rules.py`` lists them)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tl_geometry.errors import InputError


@dataclass(frozen=True)
class Lazy:
    """A callable named ``"module:attribute"``, imported when first called (and looked up again
    on every call, so a monkeypatched attribute is seen). Lets a family declare a figure or a
    reading without importing matplotlib or the rendering modules at ``import tl_geometry``."""

    ref: str

    def __post_init__(self):
        if not isinstance(self.ref, str) or self.ref.count(":") != 1 or not all(self.ref.split(":")):
            raise InputError(f"a lazy reference is 'module:attribute', got {self.ref!r}")

    def resolve(self) -> Callable:
        module, attr = self.ref.split(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)
