"""The pass registry: built-in passes (one module per pass in specir.passes), plugins loaded from
a file (`--plugin FILE.py`), and the `specir.passes` entry-point group."""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
import traceback
from pathlib import Path

from ..errors import SourceLocation, SpecirError
from ..time_limit import TimeLimitExceeded, pass_timeout, time_limit
from .base import Pass

_REGISTRY: dict[str, type[Pass]] = {}
_LOADED = False
_FOREIGN: list[str] = []  # plugin files and entry points imported into this process


def foreign_code_loaded() -> list[str]:
    """What this process imported beyond specir itself (plugins, entry points); the guard judges in
    a fresh process when this is not empty."""
    return list(_FOREIGN)


def register(cls: type[Pass]) -> type[Pass]:
    """Register a Pass subclass under its name (usable as a decorator). A name that another class
    already holds is an error: a plugin cannot replace a built-in pass (or another plugin's)."""
    if not (inspect.isclass(cls) and issubclass(cls, Pass) and cls.name):
        raise SpecirError(f"{cls!r} is not a Pass subclass with a name",
                          hint='give it a kebab-case name: class MyPass(Pass): name = "my-pass"')
    held = _REGISTRY.get(cls.name)
    if held is not None and held is not cls and _origin(held) != _origin(cls):
        kind = "a built-in pass" if held.__module__.startswith("specir.passes.") else "already a pass"
        raise SpecirError(f"pass name {cls.name!r} ({_origin(cls)}) is {kind} ({_origin(held)})",
                          location=_class_location(cls),
                          hint=f"give the plugin's pass another name, e.g. my-{cls.name}")
    _REGISTRY[cls.name] = cls
    return cls


def _origin(cls) -> str:
    """Where a pass class comes from, for messages: its source file, else module.qualname."""
    try:
        return inspect.getsourcefile(cls) or f"{cls.__module__}.{cls.__qualname__}"
    except TypeError:
        return f"{cls.__module__}.{cls.__qualname__}"


def _class_location(cls) -> SourceLocation | None:
    try:
        lines, start = inspect.getsourcelines(cls)
        return SourceLocation(inspect.getsourcefile(cls) or "?", start, 1, lines[0].rstrip("\n"))
    except (OSError, TypeError):
        return None


def _register_module(module) -> list[str]:
    names = []
    for obj in vars(module).values():
        if inspect.isclass(obj) and issubclass(obj, Pass) and obj is not Pass and obj.name \
                and obj.__module__ == module.__name__:
            register(obj)
            names.append(obj.name)
    return names


def load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import specir.passes as package
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            _register_module(importlib.import_module(f"specir.passes.{info.name}"))
    load_entry_points()


def load_entry_points() -> None:
    from importlib.metadata import entry_points
    for ep in entry_points(group="specir.passes"):
        _FOREIGN.append(f"entry point {ep.name} ({ep.value})")
        try:
            with time_limit(pass_timeout(), f"entry point {ep.name}"):
                obj = ep.load()
            if inspect.ismodule(obj):
                _register_module(obj)
            else:
                register(obj)
        except (Exception, SystemExit, TimeLimitExceeded) as exc:  # a broken third-party package must not break specir
            message = exc.message if isinstance(exc, SpecirError) else f"{type(exc).__name__}: {exc}"
            print(f"specir: warning: entry point {ep.name} ({ep.value}) failed to load: {message}", file=sys.stderr)


def load_plugin(path: str | Path) -> list[str]:
    """Import a Python file and register every Pass subclass it defines. Returns their names."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.py"))[:3]
        raise SpecirError(f"--plugin {str(path)!r} is a folder, not a Python file", path=str(path),
                          hint="--plugin takes one .py file that defines a Pass subclass (repeat --plugin for "
                               "several)" + (f"; this folder holds {', '.join(found)}" if found else ""))
    if not path.is_file():
        raise SpecirError(f"plugin file {str(path)!r} does not exist", path=str(path),
                          hint="--plugin takes a .py file that defines a Pass subclass")
    load_builtin()  # first, so that a plugin pass named like a built-in one is refused, not shadowed
    module_name = f"specir_plugin_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    _FOREIGN.append(str(path.resolve()))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SpecirError(f"cannot import {str(path)!r} as a Python module", path=str(path),
                          hint="--plugin takes a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with time_limit(pass_timeout(), f"importing plugin {path.name}"):
            spec.loader.exec_module(module)
    except SpecirError:
        raise
    except SyntaxError as exc:
        loc = SourceLocation(str(path), exc.lineno or 1, exc.offset or 1, (exc.text or "").rstrip("\n"))
        raise SpecirError(f"plugin has a syntax error: {exc.msg}", location=loc,
                          hint="fix the plugin; specir imports it as a normal Python module") from None
    except (Exception, SystemExit, TimeLimitExceeded) as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        line = frames[-1].lineno if frames else 1
        loc = SourceLocation(str(path), line, 1, frames[-1].line if frames else "")
        if isinstance(exc, TimeLimitExceeded):
            raise SpecirError(f"importing plugin {path.name} did not finish within {exc.seconds:g} s", location=loc,
                              hint="the plugin may loop forever at import; raise the limit with --pass-timeout "
                                   "SECONDS if it is only slow") from None
        if isinstance(exc, SystemExit):
            raise SpecirError(f"plugin {path.name} called sys.exit({exc.code!r}) while being imported", location=loc,
                              hint="a plugin defines passes and ops; it must not exit the process") from None
        raise SpecirError(f"plugin failed to load: {type(exc).__name__}: {exc}", location=loc,
                          hint="fix the plugin; specir imports it as a normal Python module") from None
    names = _register_module(module)
    if not names:
        raise SpecirError(f"plugin {path.name} defines no Pass subclass with a name", path=str(path),
                          hint="class MyPass(Pass): name = \"my-pass\"; def run(self, pipeline): ...")
    return names


def get(name: str) -> type[Pass]:
    load_builtin()
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = (f"did you mean {close[0]!r}? " if close else "") + "passes: " + ", ".join(sorted(_REGISTRY))
        raise SpecirError(f"unknown pass {name!r}", hint=hint)
    return _REGISTRY[name]


def all_passes() -> dict[str, type[Pass]]:
    load_builtin()
    return dict(sorted(_REGISTRY.items()))


def provider_of(fact: str) -> str | None:
    for name, cls in all_passes().items():
        if fact in cls.provides:
            return name
    return None
