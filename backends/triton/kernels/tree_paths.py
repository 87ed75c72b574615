"""When a recurrent kernel replays each tree node's path in its own program (the PATHS variants
of gated_delta.py, mamba2_scan.py and conv1d.py, paths from RecurrentForward.paths) instead of walking the
forward's tokens in one program: a tree forward (not a chain) of more than one token whose nodes
all fit the state ring at once. A chain keeps its state in registers along the walk; a forward
longer than the ring must write its nodes in order (later ones overwrite the oldest)."""
from __future__ import annotations


def replays_paths(rf, T: int) -> bool:
    """Whether the forward `rf` (a RecurrentForward) of T tokens runs one program per node."""
    return not rf.chain and 1 < T <= rf.store.nodes
