"""Immutable IR nodes with structural equality and hashing.

Source locations ride along on nodes for error messages but take no part in equality or
hashing, so two pipelines that print the same compare equal (the search deduplicates on it).

Operands are strings with their sigil: `%name` for SSA values, `@name` for models.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SourceLocation
from .types import TensorType, Type, mask


class Symbol(str):
    """A model symbol as an attribute value (`target = @target`); the string is the name without '@'."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"@{str(self)}"


class Attrs(Mapping):
    """A frozen, key-sorted attribute dictionary. Values: int, float, bool, str, Symbol, tuple, Attrs."""

    __slots__ = ("_items",)

    def __init__(self, items: Any = ()):
        pairs = items.items() if isinstance(items, Mapping) else items
        object.__setattr__(self, "_items", tuple(sorted((str(k), _freeze(v)) for k, v in pairs)))

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Attrs({dict(self._items)!r})"

    def set(self, **changes: Any) -> "Attrs":
        """A copy with `changes` applied; a value of None removes the key."""
        merged = dict(self._items)
        for k, v in changes.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        return Attrs(merged)

    def to_python(self) -> dict:
        return {k: _thaw(v) for k, v in self._items}


def _freeze(value: Any) -> Any:
    if isinstance(value, Attrs):
        return value
    if isinstance(value, Mapping):
        return Attrs(value)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Attrs):
        return value.to_python()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def make_attrs(**kwargs: Any) -> Attrs:
    return Attrs({k: v for k, v in kwargs.items() if v is not None})


def _loc() -> Any:
    return field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Op:
    """`%result = name operands {attrs} : type`; result and type are None for effects."""

    name: str
    operands: tuple[str, ...] = ()
    attrs: Attrs = field(default_factory=Attrs)
    result: str | None = None
    type: Type | None = None
    loc: SourceLocation | None = _loc()

    def with_(self, **changes: Any) -> "Op":
        return replace(self, **changes)

    @property
    def values(self) -> tuple[str, ...]:
        """Operands that are SSA values (not model symbols)."""
        return tuple(o for o in self.operands if o.startswith("%"))

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(o for o in self.operands if o.startswith("@"))


@dataclass(frozen=True)
class Weight:
    """A named checkpoint tensor the model graph may reference."""

    name: str
    type: TensorType
    attrs: Attrs = field(default_factory=Attrs)
    loc: SourceLocation | None = _loc()


@dataclass(frozen=True)
class Graph:
    """A model's forward: typed parameters, ops in order, one returned value."""

    params: tuple[tuple[str, Type], ...]
    ops: tuple[Op, ...]
    result: str
    result_type: Type
    loc: SourceLocation | None = _loc()


@dataclass(frozen=True)
class Model:
    """`model @name {attrs} { weights; graph }`, or unexpanded `model @name = import("dir")`."""

    name: str
    attrs: Attrs = field(default_factory=Attrs)
    weights: tuple[Weight, ...] = ()
    graph: Graph | None = None
    import_path: str | None = None
    loc: SourceLocation | None = _loc()

    @property
    def is_import(self) -> bool:
        return self.graph is None

    def with_attrs(self, **changes: Any) -> "Model":
        return replace(self, attrs=self.attrs.set(**changes))

    @property
    def mask_kind(self) -> str | None:
        """The kind of its graph's mask parameter (`mask<tree>`: "tree"); None without one."""
        for _, t in self.graph.params if self.graph is not None else ():
            if t.name == "mask" and t.params:
                return str(t.params[0])
        return None

    def with_mask(self, kind: str) -> "Model":
        """The model with its graph's mask parameter of `kind` (unchanged without a graph or a mask)."""
        if self.graph is None:
            return self
        params = tuple((n, mask(kind) if t.name == "mask" else t) for n, t in self.graph.params)
        return replace(self, graph=replace(self.graph, params=params))

    def weight(self, name: str) -> Weight | None:
        index = self.__dict__.get("_weight_index")
        if index is None:  # built once per (immutable) model: a lookup per op stays O(1)
            index = {}
            for w in self.weights:
                index.setdefault(w.name, w)
            object.__setattr__(self, "_weight_index", index)
        return index.get(name)


@dataclass(frozen=True)
class Step:
    """The decode step: parameters (one `context`) and ops run once per step."""

    params: tuple[tuple[str, Type], ...]
    ops: tuple[Op, ...]
    loc: SourceLocation | None = _loc()


@dataclass(frozen=True)
class Pipeline:
    name: str
    attrs: Attrs = field(default_factory=Attrs)
    models: tuple[Model, ...] = ()
    step: Step | None = None
    loc: SourceLocation | None = _loc()
    source_file: str | None = field(default=None, compare=False, hash=False, repr=False)

    def model(self, name: str) -> Model | None:
        name = name.lstrip("@")
        for m in self.models:
            if m.name == name:
                return m
        return None

    def used_models(self) -> list[Model]:
        """The models with a graph that some step op names, in declaration order."""
        used = {s.lstrip("@") for op in (self.step.ops if self.step else ()) for s in op.symbols}
        return [m for m in self.models if m.name in used and m.graph is not None]

    def with_model(self, model: Model) -> "Pipeline":
        models = tuple(model if m.name == model.name else m for m in self.models)
        return replace(self, models=models)

    def with_(self, **changes: Any) -> "Pipeline":
        return replace(self, **changes)


