"""Recurrent state of one model: committed state per request slot, plus per-node scratch states
for a forward over several new tokens (a chain or a token tree), and the commit that picks the
state after one node.

Layout, per (layer, state name) of the model's recurrent ops (`ops_recurrent.state_specs`):
- `committed[key]` [slots, *shape]: the state after the slot's committed tokens (zeros at first);
- `scratch[key]` [slots, nodes, *shape]: a ring of node states. Node n of a slot (n = the new
  token's index among the slot's scratch rows: offsets[b] + t, as for the KV cache) lives at ring
  position (base[slot] + n) % nodes; `owner` records which node each position holds.

A forward's token t of request b derives its state from its PARENT: the nearest earlier node the
forward's mask shows it (`tree_parents`), or the committed state when there is none (parent -1).
Every node's state after it is written to scratch, so after verification

    commit(slots, nodes, advance)

makes node nodes[b]'s state the committed one of slots[b] (node -1: keep the committed state)
and shifts the ring by advance[b] (default nodes[b] + 1), exactly as the KV cache promotes rows:
commit_prefix(slot, n) is commit(node n - 1, advance n), the accepted tree path `rows` is
commit(node rows[-1], advance len(rows)). It is one batched tensor operation, so a device-side
accept can hand it the last accepted node of every request without a host round trip.

A kernel may keep a forward's node states of one key in another form than the ring (the gated
delta tree kernel keeps its WY factors: backends/triton/kernels/delta_factors.py): it attaches a
`FactoredNodes` for that key (`attach_factored`), and commit, reset and `node_states` go through it
for that key; the ring of that key then holds only the nodes the kernel did write in full.

Capacity: a forward keeps its last `nodes` nodes (a longer chain overwrites the oldest); a tree
node's parent must be at most `nodes` nodes before it. Committing or reading a node that was
overwritten is a SpecirError, never a silent wrong state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..errors import SpecirError
from ..ir.ops_recurrent import StateSpec

Key = tuple[int, str]


def tree_parents(mask: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """parents [B, T] (int64): for new token t of request b (node offsets[b] + t), the largest
    node u < offsets[b] + t with mask[b, t, u], or -1. mask is [B, T, U] (U >= max(offsets) + T)."""
    B, T, U = mask.shape
    node = offsets[:, None] + torch.arange(T, device=mask.device)[None, :]  # [B, T]
    u = torch.arange(U, device=mask.device)
    earlier = mask & (u[None, None, :] < node[:, :, None])
    best = torch.where(earlier, u[None, None, :], torch.full_like(u, -1)[None, None, :]).amax(-1)
    return best.to(torch.long)


RING_BYTES_PER_SLOT = 1 << 30  # a state ring's budget per request slot (beyond what a step's nodes need)
RING_NODES_MAX = 64  # nodes a ring holds at most beyond a step's needs (the longest prefill chunk)


def node_bytes(specs, act_bytes: int) -> int:
    """Bytes of one node's recurrent states (every layer's), for one request."""
    return sum(math.prod(spec.shape) * (4 if spec.dtype == "f32" else act_bytes) for spec in specs)


def ring_nodes(specs, step_nodes: int, act_bytes: int = 2) -> int:
    """Scratch nodes per slot of a model whose steps forward `step_nodes` nodes: those, or more
    (up to RING_NODES_MAX, so a prefill runs in chunks that long) while the ring stays within
    RING_BYTES_PER_SLOT. At a 9B hybrid shape (51 MB of state a node) that is 21 nodes, not 64."""
    per_node = max(1, node_bytes(specs, act_bytes))
    return max(int(step_nodes), min(RING_NODES_MAX, RING_BYTES_PER_SLOT // per_node), 1)


class FactoredNodes:
    """Node states of one key that a kernel kept in its own form (RecurrentStates.attach_factored)."""

    def commit(self, store: "RecurrentStates", key: Key, slots: torch.Tensor, nodes: torch.Tensor) -> None:
        """committed[key][slots[b]] = the state after node nodes[b] (-1: unchanged), from the
        factors where they hold the node, else from the ring; before the ring's base moves."""
        raise NotImplementedError

    def read(self, store: "RecurrentStates", key: Key, slots: torch.Tensor, nodes: torch.Tensor,
             states: torch.Tensor) -> torch.Tensor:
        """`states` (committed or ring) with the nodes the factors hold replaced by their states."""
        raise NotImplementedError

    def reset(self, slots: torch.Tensor) -> None:
        """Forget the factored nodes of `slots` (new requests)."""
        raise NotImplementedError


class RecurrentStates:
    """Committed and scratch recurrent state of one model (see the module docstring)."""

    def __init__(self, specs: list[StateSpec], slots: int, nodes: int, act_dtype, device):
        if nodes < 1:
            raise SpecirError(f"the recurrent state store needs at least one scratch node, got {nodes}")
        self.slots, self.nodes, self.device = slots, nodes, torch.device(device)
        self.specs: dict[Key, StateSpec] = {}
        for spec in specs:
            key = (spec.layer, spec.name)
            if key in self.specs and self.specs[key] != spec:
                raise SpecirError(f"recurrent state {spec.name!r} of layer {spec.layer} is declared twice with "
                                  f"different shapes", hint="give each recurrent op its own (layer, state) pair")
            self.specs[key] = spec
        self.committed: dict[Key, torch.Tensor] = {}
        self.scratch: dict[Key, torch.Tensor] = {}
        for key, spec in self.specs.items():
            dtype = torch.float32 if spec.dtype == "f32" else act_dtype
            self.committed[key] = torch.zeros(slots, *spec.shape, dtype=dtype, device=self.device)
            self.scratch[key] = torch.zeros(slots, nodes, *spec.shape, dtype=dtype, device=self.device)
        self.base = torch.zeros(slots, dtype=torch.long, device=self.device)
        self.owner = torch.full((slots, nodes), -1, dtype=torch.long, device=self.device)
        self.factored: dict[Key, "FactoredNodes"] = {}

    def attach_factored(self, key: Key, nodes: "FactoredNodes") -> "FactoredNodes":
        """Let `nodes` hold (some of) key's node states; the one already attached wins (returned)."""
        if key not in self.specs:
            raise SpecirError(f"no recurrent state {key[1]!r} in layer {key[0]} to keep factored")
        return self.factored.setdefault(key, nodes)

    def node_states(self, key: Key, slots: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """The state after node nodes[b] of slot slots[b] ([B, *shape]; -1: the committed state),
        from the ring or, where a kernel kept it factored, rebuilt from its factors."""
        slots, nodes = slots.to(self.device, torch.long), nodes.to(self.device, torch.long)
        committed = self.committed[key][slots]
        ring = self.scratch[key][slots, self.ring(slots, nodes)]
        states = torch.where((nodes < 0).view(-1, *([1] * (committed.dim() - 1))), committed, ring)
        factored = self.factored.get(key)
        return states if factored is None else factored.read(self, key, slots, nodes, states)

    # ------------------------------------------------------------------ addressing
    def ring(self, slots: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """Ring positions of nodes [B, ...] of slots [B]."""
        base = self.base[slots].view(-1, *([1] * (nodes.dim() - 1)))
        return (base + nodes.clamp_min(0)) % self.nodes

    def _held(self, slots: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """Whether each node >= 0 still holds its state (True for nodes < 0)."""
        base = self.base[slots].view(-1, *([1] * (nodes.dim() - 1)))
        rows = slots.view(-1, *([1] * (nodes.dim() - 1))).expand_as(nodes)
        return (nodes < 0) | (self.owner[rows, self.ring(slots, nodes)] == base + nodes)

    # ------------------------------------------------------------------ a forward
    def begin(self, slots: torch.Tensor, offsets: torch.Tensor, parents: torch.Tensor, *, chain: bool | None = None,
              check: bool = True) -> "RecurrentForward":
        """Start a forward whose token t of request b is node offsets[b] + t with parent
        parents[b, t]; claims the nodes' ring positions. `chain` (every parent the token before)
        is read from `parents` when None; `check=False` skips the capacity checks (host reads),
        for forwards captured into CUDA graphs."""
        B, T = parents.shape
        nodes = offsets[:, None] + torch.arange(T, device=parents.device)[None, :]
        inside = parents >= offsets[:, None]  # parent among this forward's tokens
        if check and bool((inside & (nodes - parents > self.nodes)).any()):
            raise SpecirError(f"a tree node's parent is more than {self.nodes} nodes before it: the recurrent "
                              f"state store keeps {self.nodes} node states",
                              hint="raise the runner's state_nodes (recurrent scratch) or shrink the draft tree")
        outside = (parents >= 0) & ~inside
        if check and bool(outside.any()) and not bool(self._held(slots, torch.where(outside, parents, -1)).all()):
            raise SpecirError("a forward continues from a scratch node whose recurrent state was overwritten",
                              hint="commit before continuing, or raise the runner's state_nodes")
        if check and bool((outside & (offsets[:, None] + T - 1 - parents >= self.nodes)).any()):
            raise SpecirError(f"a forward continues from a scratch node that its own nodes would overwrite (the "
                              f"recurrent state store keeps {self.nodes} node states)",
                              hint="raise the runner's state_nodes, or commit before continuing")
        kept = nodes[:, -self.nodes:]  # a longer chain keeps its last `nodes` nodes
        rows = slots[:, None].expand_as(kept)
        self.owner[rows, self.ring(slots, kept)] = self.base[slots][:, None] + kept
        if chain is None:
            chain = bool((parents[:, 1:] == nodes[:, :-1]).all())
        return RecurrentForward(self, slots, nodes, parents, chain)

    # ------------------------------------------------------------------ commit
    def commit(self, slots: torch.Tensor, nodes: torch.Tensor, advance: torch.Tensor | None = None, *,
               check: bool = True) -> None:
        """Make the state after node nodes[b] slot slots[b]'s committed state (-1: keep it) and
        shift that slot's ring by advance[b] (default nodes[b] + 1). Batched; slots distinct.
        `check` (a host sync) refuses nodes whose state was overwritten; off for captured steps."""
        slots, nodes = slots.to(self.device, torch.long), nodes.to(self.device, torch.long)
        if check and not bool(self._held(slots, nodes).all()):
            bad = nodes[~self._held(slots, nodes)].tolist()
            raise SpecirError(f"cannot commit recurrent state of node(s) {bad}: overwritten by later nodes of "
                              f"the same forward (the store keeps the last {self.nodes})",
                              hint="raise the runner's state_nodes, or forward such requests in separate batches")
        take = nodes >= 0
        pos = self.ring(slots, nodes)
        for key, committed in self.committed.items():
            if key in self.factored:
                self.factored[key].commit(self, key, slots, nodes)
                continue
            picked = self.scratch[key][slots, pos]
            keep = take.view(-1, *([1] * (picked.dim() - 1)))
            committed[slots] = torch.where(keep, picked, committed[slots])
        self.base[slots] += (nodes + 1) if advance is None else advance.to(self.device, torch.long)

    def reset(self, slots: torch.Tensor) -> None:
        """Start slots afresh (a new request): zero committed state, empty ring."""
        slots = slots.to(self.device, torch.long)
        for committed in self.committed.values():
            committed[slots] = 0
        for factored in self.factored.values():
            factored.reset(slots)
        self.base[slots] = 0
        self.owner[slots] = -1

    def commit_one(self, slot: int, node: int, advance: int | None = None) -> None:
        s = torch.tensor([slot], device=self.device)
        self.commit(s, torch.tensor([node], device=self.device),
                    None if advance is None else torch.tensor([advance], device=self.device))


@dataclass
class RecurrentForward:
    """One forward's view of the store, handed to recurrent kernels through ForwardState:
    `initial(key, t)` is the state token t starts from (its parent's), `save(key, t, value)`
    stores the state after token t. Tokens are processed in order (a parent precedes its children)."""

    store: RecurrentStates
    slots: torch.Tensor  # [B]
    nodes: torch.Tensor  # [B, T] node index of each token
    parents: torch.Tensor  # [B, T] parent node, -1 for the committed state
    chain: bool = False  # every token's parent is the token before it (t > 0)
    _paths: tuple | None = field(default=None, repr=False, compare=False)  # paths(), once per forward
    _ancestors: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def paths(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(path [B, T, T] int32, depth [B, T] int32, start [B, T] int64), computed once per forward
        with device tensor ops (no host sync: capturable): token t's ancestors inside this forward
        and t itself in token order, `path[b, t, :depth[b, t]]`, and the node its first token
        starts from (a scratch node before this forward, or -1: the committed state). Kernels
        that give every node its own program replay a node's path instead of waiting for its parent."""
        if self._paths is None:
            B, T = self.parents.shape
            dev = self.parents.device
            token = torch.arange(T, device=dev)
            inside = self.parents >= self.nodes[:, :1]
            jump = torch.where(inside, self.parents - self.nodes[:, :1], token[None, :])  # a root points at itself
            anc = (token[None, :, None] == token[None, None, :]).expand(B, T, T).clone()
            for _ in range(max(1, (T - 1).bit_length())):  # pointer doubling: 2^i ancestors after i rounds
                anc |= anc.gather(1, jump[:, :, None].expand(B, T, T))
                jump = jump.gather(1, jump)
            depth = anc.sum(-1)
            where = torch.where(anc, anc.cumsum(-1) - 1, torch.full_like(depth[..., None], T))
            path = torch.full((B, T, T + 1), -1, dtype=torch.int32, device=dev)
            path.scatter_(2, where, token.to(torch.int32)[None, None, :].expand(B, T, T).contiguous())
            start = self.parents.gather(1, path[:, :, 0].long())
            self._paths = (path[:, :, :T].contiguous(), depth.to(torch.int32), start.contiguous())
            self._ancestors = anc.to(torch.int8)
        return self._paths

    def ancestors(self) -> torch.Tensor:
        """[B, T, T] int8: 1 where token j is token t or one of its ancestors in this forward (paths())."""
        self.paths()
        return self._ancestors

    def initial(self, key: Key, t: int) -> torch.Tensor:
        return self.store.node_states(key, self.slots, self.parents[:, t])

    def save(self, key: Key, t: int, value: torch.Tensor) -> None:
        pos = self.store.ring(self.slots, self.nodes[:, t])
        self.store.scratch[key][self.slots, pos] = value.to(self.store.scratch[key].dtype)

    def save_all(self, key: Key, values: torch.Tensor) -> None:
        """Store the states after every token at once: values [B, T, *shape]."""
        keep = self.store.nodes  # a longer chain keeps its last `nodes` nodes (no duplicate writes)
        nodes, values = self.nodes[:, -keep:], values[:, -keep:]
        pos = self.store.ring(self.slots, nodes)
        rows = self.slots[:, None].expand_as(nodes)
        self.store.scratch[key][rows, pos] = values.to(self.store.scratch[key].dtype)
