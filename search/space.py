"""The search space: pass pipelines built from the registry's passes and their options' values.

A candidate is a pass-pipeline string (`draft-shape{k=2},tree-verify{budget=8}`): an ordered list
of passes, each with the options that differ from their defaults. Every option declares the
values a search tries (`Option.search_values()`: its `search` tuple, its choices, both booleans,
or its default), so the space is the registry's passes (built-in ones and those of --plugin
files, described by a sandboxed process) x their options' values x their orderings. Moves:
change one option to another of its values, add a pass, drop a pass, swap two neighbours.
Whether a candidate is valid (facts, preconditions, the verifier) is for the pass manager to say;
two candidates are the same when their final IR is (the search compares IR digests).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

# Where `add` puts a pass: drafting shape first, then the tree, then the mid level, then batching;
# canonicalize last.
ORDER_HINT = {"draft-shape": 0, "ngram-draft": 0, "draft-vocab": 0, "tree-verify": 1, "two-level-verify": 2, "batch-fusion": 3,
              "canonicalize": 9}
# canonicalize changes no behaviour worth timing (printed IR only); draft-vocab's acceptance cost
# depends on the real vocabulary, which a checkpoint inflated to a production shape (the zoo's)
# hides behind padding ids: a search there would keep it for free. Name it in a --space file.
SKIP = {"canonicalize", "draft-vocab"}


@dataclass(frozen=True)
class PassInfo:
    name: str
    options: dict  # option -> (default, tuple of values to try)
    origin: str = "builtin"  # or the plugin file


@dataclass(frozen=True)
class Step:
    name: str
    options: tuple = ()  # sorted (key, value) pairs that differ from the defaults

    def spelled(self) -> str:
        if not self.options:
            return self.name
        def fmt(v):
            return ("true" if v else "false") if isinstance(v, bool) else str(v)
        return self.name + "{" + ",".join(f"{k}={fmt(v)}" for k, v in self.options) + "}"


@dataclass
class Space:
    passes: dict[str, PassInfo] = field(default_factory=dict)

    @classmethod
    def from_registry(cls, plugin_passes: dict | None = None) -> "Space":
        """Built-in passes from the registry, plus plugin passes described as data
        ({name: {"options": {k: {"default", "search"}}, "origin": path}})."""
        from specir.pass_infra import all_passes
        space = cls()
        for name, p in all_passes().items():
            if name in SKIP or getattr(p, "__module__", "").startswith("specir_plugin_"):
                continue
            space.passes[name] = PassInfo(name, {k: (o.default, tuple(o.search_values())) for k, o in p.options.items()})
        for name, d in (plugin_passes or {}).items():
            space.passes[name] = PassInfo(name, {k: (o["default"], tuple(o["search"])) for k, o in d["options"].items()},
                                          d.get("origin", "plugin"))
        return space

    # ------------------------------------------------------------------ candidates
    def step(self, name: str, **values) -> Step:
        info = self.passes[name]
        changed = tuple(sorted((k, v) for k, v in values.items() if k in info.options and v != info.options[k][0]))
        return Step(name, changed)

    @staticmethod
    def spell(steps) -> str:
        return ",".join(s.spelled() for s in steps)

    def parse(self, text: str) -> tuple[Step, ...]:
        """A pipeline string back into steps (options converted like the defaults' types)."""
        from specir.pass_infra import parse_pipeline_string
        steps = []
        for spec in parse_pipeline_string(text) if text else []:
            info = self.passes.get(spec.name)
            values = {}
            for k, raw in spec.options.items():
                default = info.options[k][0] if info and k in info.options else raw
                values[k] = _convert(raw, default)
            steps.append(self.step(spec.name, **values) if info else Step(spec.name, tuple(sorted(values.items()))))
        return tuple(steps)

    def plugins_of(self, steps) -> list[str]:
        return sorted({self.passes[s.name].origin for s in steps
                       if s.name in self.passes and self.passes[s.name].origin != "builtin"})

    # ------------------------------------------------------------------ moves
    def neighbours(self, steps: tuple[Step, ...]) -> list[tuple[Step, ...]]:
        """Every candidate one move away."""
        out = []
        for i, s in enumerate(steps):
            info = self.passes.get(s.name)
            if info is None:
                continue
            current = dict(s.options)
            for key, (default, values) in info.options.items():
                for v in values:
                    if v != current.get(key, default):
                        out.append(steps[:i] + (self.step(s.name, **{**current, key: v}),) + steps[i + 1:])
            out.append(steps[:i] + steps[i + 1:])
            if i + 1 < len(steps):
                out.append(steps[:i] + (steps[i + 1], s) + steps[i + 2:])
        present = {s.name for s in steps}
        for name in self.passes:
            if name in present:
                continue
            new = self.step(name)
            pos = sum(1 for s in steps if ORDER_HINT.get(s.name, 5) <= ORDER_HINT.get(name, 5))
            out.append(steps[:pos] + (new,) + steps[pos:])
        return out

    def random(self, rng: random.Random, max_passes: int = 3) -> tuple[Step, ...]:
        names = rng.sample(sorted(self.passes), k=min(len(self.passes), rng.randint(0, max_passes)))
        names.sort(key=lambda n: ORDER_HINT.get(n, 5))
        steps = []
        for name in names:
            info = self.passes[name]
            values = {k: rng.choice(vals) for k, (_, vals) in info.options.items() if vals}
            steps.append(self.step(name, **values))
        return tuple(steps)

    def size(self) -> int:
        """Candidates with each pass at most once, in the hinted order (orderings not counted)."""
        total = 1
        for info in self.passes.values():
            n = 1
            for _, vals in info.options.values():
                n *= max(len(vals), 1)
            total *= n + 1
        return total


def _convert(raw: str, default):
    if isinstance(default, bool):
        return raw == "true"
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(raw)
            except ValueError:
                return raw
    return raw
