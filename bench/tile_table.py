"""Rewrite a measured launch table (a module-level dict literal) in a kernel's source: the `--apply` of
bench/gemm_tune.py (linear_config.GEMM_TILES) and bench/attention_tune.py (attention.ATTENTION_TILES)."""
from __future__ import annotations

import re
import sys
from pathlib import Path


def write_table(source: Path, name: str, key_type: str, next_name: str, table: dict, found: dict) -> int:
    """Replace `NAME: dict[KEY_TYPE, dict] = {...}` (followed by a line starting with `next_name`) in `source` with
    `table` merged with `found` (found's entries win), sorted, one entry a line; print the new entries. 1 when the
    table is not found (nothing written), else 0."""
    tiles = {**table, **found}
    body = "".join(f"\n    {key}: {value!r}," for key, value in sorted(tiles.items()))
    head = f"{name}: dict[{key_type}, dict] = "
    new, count = re.subn(re.escape(head) + r"\{.*?\}\n" + re.escape(next_name),
                         lambda _: f"{head}{{{body}\n}}\n{next_name}", source.read_text(), flags=re.S)
    if count != 1:
        print(f"{source}: {name} not found", file=sys.stderr)
        return 1
    source.write_text(new)
    for key, value in sorted(found.items()):
        print(f"{name}[{key}] = {value}")
    print(f"wrote {len(found)} entries ({len(tiles)} in all) to {source}")
    return 0
