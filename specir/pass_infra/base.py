"""The Pass base class.

A pass is a pure function Pipeline -> Pipeline with a kebab-case `name`, typed `options`
(with defaults), the `requires` facts it needs and the `provides` facts it establishes. Facts
live in the IR (the pipeline's `facts` attribute), so they survive printing and re-parsing.
Subclasses implement `run`; the PassManager verifies the IR after every pass.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import SpecirError
from ..ir.nodes import Pipeline

KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


@dataclass(frozen=True)
class Option:
    type: type
    default: Any
    doc: str = ""
    choices: tuple | None = None
    min: int | float | None = None  # smallest allowed value (numbers only)
    max: int | float | None = None  # largest allowed value (numbers only)
    search: tuple | None = None  # the values a search tries (default: `choices`, booleans, or the default)

    def convert(self, raw: Any) -> Any:
        """Convert a raw option value (a string from -p, or a Python value); ValueError if it does not fit."""
        value = raw
        if isinstance(raw, str) and self.type is not str:
            text = raw.strip()
            if self.type is bool:
                if text not in ("true", "false"):
                    raise ValueError
                value = text == "true"
            elif self.type is int:
                value = int(text)
            elif self.type is float:
                value = float(text)
        elif self.type is float and isinstance(raw, int) and not isinstance(raw, bool):
            value = float(raw)
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise ValueError
        if self.choices and value not in self.choices:
            raise ValueError
        if self.type is float and not math.isfinite(value):
            raise ValueError
        if self.min is not None and value < self.min:
            raise ValueError
        if self.max is not None and value > self.max:
            raise ValueError
        if self.type is int and not -(2**63) <= value < 2**63:
            raise TooLarge("must fit in 64 bits")  # every integer of the IR is 64-bit
        return value

    def search_values(self) -> tuple:
        """The values worth trying, in order: `search`, else `choices`, else both booleans, else the default."""
        if self.search is not None:
            return tuple(self.search)
        if self.choices:
            return tuple(self.choices)
        if self.type is bool:
            return (False, True)
        return (self.default,)

    def describe(self) -> str:
        text = _TYPE_NAMES.get(self.type, self.type.__name__)
        if self.type is float:
            text = "a finite number"
        if self.min is not None:
            text += f" >= {self.min}"
        if self.max is not None:
            text += f" and <= {self.max}" if self.min is not None else f" <= {self.max}"
        return f"one of {list(self.choices)}" if self.choices else text


class TooLarge(ValueError):
    """An option value of the right type above its maximum (the message says which)."""


class Pass:
    name: ClassVar[str] = ""
    options: ClassVar[dict[str, Option]] = {}
    requires: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset()
    compile_target: str | None = None  # set by the PassManager: the target being compiled for, None under opt

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name and not KEBAB.match(cls.name):
            raise SpecirError(f"pass name {cls.name!r} is not kebab-case", hint="e.g. my-pass")

    def __init__(self, **options: Any):
        unknown = set(options) - set(self.options)
        if unknown:
            raise SpecirError(f"unknown option {sorted(unknown)[0]!r} for pass {self.name}",
                              hint="options: " + (", ".join(sorted(self.options)) or "none"))
        self.values = {k: opt.default for k, opt in self.options.items()}
        for key, raw in options.items():
            try:
                self.values[key] = self.options[key].convert(raw)
            except (ValueError, TypeError, OverflowError) as exc:
                shown = raw if not isinstance(raw, str) or len(raw) <= 40 else raw[:37] + "..."
                want = str(exc) if isinstance(exc, TooLarge) else f"must be {self.options[key].describe()}"
                raise SpecirError(f"option {key!r} of pass {self.name} {want}, got {shown!r}",
                                  hint=self.options[key].doc or None) from None

    def option_error(self, key: str, message: str, hint: str | None = None) -> SpecirError:
        """An error about option `key`, located at it in the -p string when the pass came from one."""
        where = getattr(self, "where", None)
        loc = (where or {}).get(key) or (where or {}).get("")
        return SpecirError(message, location=loc, hint=hint)

    def __getattr__(self, key: str) -> Any:
        values = self.__dict__.get("values", {})
        if key in values:
            return values[key]
        raise AttributeError(key)

    def run(self, pipeline: Pipeline) -> Pipeline:  # pragma: no cover - abstract
        raise NotImplementedError

    def spelled(self) -> str:
        """This pass with its non-default options, as written in a pipeline string."""
        changed = {k: v for k, v in self.values.items() if v != self.options[k].default}
        if not changed:
            return self.name
        def fmt(v):
            return ("true" if v else "false") if isinstance(v, bool) else str(v)
        return self.name + "{" + ",".join(f"{k}={fmt(v)}" for k, v in sorted(changed.items())) + "}"


def models_option() -> Option:
    """The `models` option of passes that set a per-model policy: comma-separated names, "" = all."""
    return Option(str, "", "comma-separated model names (default: every model)", search=("",))


def selected_models(pipeline: Pipeline, models: str, pass_name: str) -> list:
    """The expanded model regions a `models` option selects (every one for ""); an unknown name is
    a SpecirError naming the models there are."""
    names = [n.strip().lstrip("@") for n in models.split(",") if n.strip()]
    for name in names:
        if pipeline.model(name) is None:
            raise SpecirError(f"{pass_name}: no model @{name}",
                              hint="models: " + ", ".join("@" + m.name for m in pipeline.models))
    return [m for m in pipeline.models if m.graph is not None and (not names or m.name in names)]
