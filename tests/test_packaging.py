"""Packaging: every Python package folder is listed in pyproject (so a wheel carries it) and
maps into the specir namespace."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = {v: k for k, v in config["package-dir"].items()}
    found = set()
    for top in ("specir", "passes", "backends", "search"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            head = mapping[rel.parts[0]]
            found.add(".".join([head, *rel.parts[1:]]))
    assert found <= listed, f"unlisted packages: {sorted(found - listed)}"


def test_namespaces_map_into_specir():
    import specir.backends
    import specir.passes
    import specir.search
    assert Path(specir.passes.__file__).parent == ROOT / "passes"
    assert Path(specir.backends.__file__).parent == ROOT / "backends"
    assert Path(specir.search.__file__).parent == ROOT / "search"
