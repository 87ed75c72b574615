"""Tables by live batch size, the format of batch.budget's `tokens` and draft.tree's `topk_at`.

Contract: entry b - 1 holds the value for b live requests; the last entry covers every larger
batch. `entry(table, live)` reads one (fewer than one live request reads the first entry);
`trimmed(values)` is the shortest table that reads the same at every size (a repeated tail dropped).
"""
from __future__ import annotations


def entry(table, live: int):
    return table[min(max(live, 1), len(table)) - 1]


def trimmed(values) -> list:
    table = list(values)
    while len(table) > 1 and table[-1] == table[-2]:
        table.pop()
    return table
