"""From a model graph of the IR to the list of Triton launches that executes it (host-side plan).

Contract: `plan_program(model)` walks `model.graph.ops` in order and returns a `Program` whose
launches compute exactly the values the IR defines; only these fusions are made, each decided by
the IR's own op pattern (nothing outside the IR is read):
- linear group: `linear` and `packed_linear` ops reading the same input with the same bias
  presence become one GEMV/GEMM over the concatenated weight rows (QKV, gate|up); each IR value
  is a column slice of the group's output (which library runs a group at a given row count:
  gemm_route.py). Plain members share one weight dtype. A group with a packed member is a
  `packed_linear` launch (its plain bf16 members are packed when the weights are prepared), so a
  packed model groups exactly as its unpacked twin: same N per launch, same split-K, same bits;
- add + rms_norm: an `rms_norm` (no `group`) that directly follows the `add` producing its input
  becomes one add_rms_norm launch writing both values;
- rope + kv_write: an `attention` whose q and k are `rope` results with the same rope
  attributes and positions, used by nothing else, gets one rope_kv_write launch (rotated q into
  its buffer, rotated k and v into the cache) and then attends; otherwise rope, kv_write and
  attention run separately;
- swiglu + linear: a `swiglu` whose result only one op reads, a linear (not grouped: nothing
  else reads that input) that runs on a Triton kernel (BF12, or bf16 weights with bf16 or fp32
  activations), becomes that linear's prologue: the launch reads the swiglu's (gate, up) and
  says `prologue = "swiglu"` (`prologue_value`: the swiglu's IR value); the kernel computes
  silu(gate) * up where it would load x (kernels/linear.py, same bits as the two launches). A
  forward whose rows route the linear to cuBLAS (gemm_route.py) binds it as silu_mul into
  `prologue_value`'s buffer, then the cuBLAS call (forward.py), so the IR's bits hold there too;
- rms_norm + linear, linear + add (`norm_linear`): an `rms_norm` (no `group`) read only by
  the members of one linear group, all on Triton kernels, becomes the group's prologue
  (`prologue = "rms_norm"`, `prologue_value` the norm's value, `norm_weight`, `eps`; the launch
  reads the norm's input); an `add` one of whose operands is a lone linear's result, read by
  nothing else, on a Triton kernel, with the other operand defined before that linear, becomes
  the linear's epilogue (`epilogue = "add"`, `epilogue_value` the linear's own value, never
  stored; `residual_value` the other operand; the launch writes the add's value). Bits as the
  separate launches (kernels/linear.py); a forward of more than one row (Triton's GEMM or cuBLAS:
  fused_parts.py) binds the norm into `prologue_value`'s buffer first, or the call into
  `epilogue_value`'s buffer and then the add. An epilogue whose add feeds a prologue's norm names
  it (`then_norm`): where both run apart the add and that norm run as one add_rms_norm launch, as
  without the fusion.
  With this fusion every rms_norm launch of the region says `fixed_order` (the prologue's order,
  kernels/_rms.py), so a norm gives the same bits folded or not; a forward that folds no norm (its
  linears on cuBLAS or torch, or more than one row: fused_parts.py) runs them in the norm kernel's
  faster order (one read of the row), as without the fusion (forward.py); so does a region without it.
- linear + rope + kv_write (`linear_rope_kv`): a linear group whose results are exactly
  the (q, k, v) of a fused rope + KV write (above), read by nothing else, all on Triton kernels,
  does that rope_kv_write in its epilogue (`epilogue = "rope_kv_write"` with the rope's and the
  attention's attributes; ins add the positions; outs: the rotated q, whose buffer is the group's
  q|k|v buffer, q in its first columns). A one-token forward runs it in the GEMV's epilogue
  (kernels/rope_kv_epilogue.py; on a GPU only once rope_kv_epilogue.VERIFIED_ON_GPU); any other
  binds the linear and then the rope_kv_write launch, rotating q in place (forward.py). Same bits
  either way; one launch a layer goes;
- launch overlap (`launch_overlap`): every linear launch says `overlap = True`; the forward
  asks for programmatic dependent launch on sm_90+ (kernels/launch_overlap.py): same values, the
  launch starts while the one before it drains. With `attention_prefetch` too, an attention launch
  whose output is the next (overlapped) linear's input says `lets_next_start = True` and that linear
  `prefetch_weights = True`: in a forward where the linear runs as a GEMV right after it, the
  attention lets it start at once and its programs prefetch all their weights into L2 first
  (forward.py).
The rest is one launch per op. Launch operands name IR values; `values` gives every value's
width so the executor can size buffers.

Hybrid families (docs/HYBRID.md): the recurrent ops (conv1d, gated_delta_rule, mamba2_scan) are
one Triton launch each (kernels/conv1d.py, gated_delta.py, mamba2_scan.py) reading and writing the
cache's recurrent state store; their zero-centred and gated norms (HYBRID_NORMS) and pointwise
ops (POINTWISE_OPS: activations, products, scales, column slices; a concatenation is one copy
launch per input) are Triton launches too (kernels/hybrid_norm.py, pointwise.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from specir.errors import SpecirError
from specir.ir.nodes import Model, Op
from specir.ir.ops_recurrent import state_specs
from specir.passes.fusion import FUSION_DEFAULTS

HYBRID_NORMS = ("rms_norm_1p", "rms_norm_gated")
POINTWISE_OPS = ("activation", "mul", "scale", "slice", "concat")
RECURRENT_OPS = ("conv1d", "gated_delta_rule", "mamba2_scan")
SUPPORTED_OPS = ("embed", "rms_norm", "linear", "packed_linear", "rope", "attention", "swiglu", "add",
                 "vocab_scatter", *HYBRID_NORMS, *POINTWISE_OPS, *RECURRENT_OPS)


@dataclass
class Launch:
    """One kernel launch: `kind` names the wrapper, `outs`/`ins` IR values, `attrs` the rest."""

    kind: str
    outs: tuple[str, ...]
    ins: tuple[str, ...]
    attrs: dict = field(default_factory=dict)
    ops: tuple[str, ...] = ()  # the IR ops (by result or name) this launch implements

    @property
    def kernel(self) -> str:
        return KERNEL_OF[self.kind]


KERNEL_OF = {
    "embed": "embedding.embedding",
    "rms_norm": "norm.rms_norm",
    "add_rms_norm": "norm.add_rms_norm",
    "linear": "linear.linear_bf16",
    "packed_linear": "linear.linear_bf12",
    "rope": "rope.rope",
    "rope_kv_write": "rope.rope_kv_write",
    "kv_write": "kv_cache.kv_write",
    "attention": "attention.attention",
    "swiglu": "activation.silu_mul",
    "add": "add.add",
    "conv1d": "conv1d.conv1d_tree",
    "gated_delta_rule": "gated_delta.gated_delta_rule_tree",
    "mamba2_scan": "mamba2_scan.mamba2_scan_tree",
    "rms_norm_1p": "hybrid_norm.rms_norm_1p",
    "rms_norm_gated": "hybrid_norm.rms_norm_gated",
    **{name: f"pointwise.{name}" for name in POINTWISE_OPS if name != "slice"},
    "slice": "pointwise.slice_",
    "vocab_scatter": "vocab_scatter.vocab_scatter",
}


@dataclass
class Program:
    model: str
    launches: list[Launch]
    values: dict[str, int]  # IR value -> width per token
    params: dict[str, str]  # "ids" | "positions" | "mask" -> IR value name
    result: str
    layers: dict[int, tuple[int, int]]  # attention layer -> (kv_heads, head_dim)
    states: list = field(default_factory=list)  # recurrent StateSpecs (ops_recurrent.state_specs)
    notes: list[str] = field(default_factory=list)
    dtype: str = "bf16"  # the model's activation dtype (IR name)
    cublas_min_rows: int | None = None  # the region's gemm policy attribute (gemm_route.py); None: unstated


def _uses(ops) -> dict[str, list[int]]:
    uses: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        for v in op.values:
            uses.setdefault(v, []).append(i)
    return uses


def _groups_with(model: Model, first: Op, other: Op) -> bool:
    """Whether `other` joins the linear group that `first` starts (see the module docstring)."""
    def is_act(op):
        return op.type is None or op.type.name == "act"

    def plain_dtype(op):
        return None if op.name == "packed_linear" else _weight_dtype(model, op.attrs["weight"])

    if other.name not in ("linear", "packed_linear") or other.values != first.values:
        return False
    if not (is_act(first) and is_act(other)) or bool(other.attrs.get("bias")) != bool(first.attrs.get("bias")):
        return False
    if "packed_linear" in (first.name, other.name):
        fmts = {op.attrs["format"] for op in (first, other) if op.name == "packed_linear"}
        return len(fmts) == 1 and all(plain_dtype(op) in (None, "bf16") for op in (first, other))
    return plain_dtype(first) == plain_dtype(other)


def _weight_dtype(model: Model, name: str) -> str:
    w = model.weight(name)
    return w.type.dtype if w is not None else "?"


def fusions(model: Model) -> dict[str, bool]:
    """The region's fusion policy: its `fuse` attribute, passes/fusion.py's defaults where unstated."""
    stated = model.attrs.get("fuse") or {}
    return {name: bool(stated.get(name, default)) for name, default in FUSION_DEFAULTS.items()}


def _triton_linear(model: Model, op: Op) -> bool:
    """Whether a linear op runs on a Triton kernel at some row count (weights.py's rule): always
    for BF12; for bf16 weights with bf16 or fp32 activations (wide bf16 forwards may go to cuBLAS)."""
    if op.name == "packed_linear":
        return True
    activations = str(model.attrs.get("dtype", "bf16"))
    return _weight_dtype(model, op.attrs["weight"]) == "bf16" and activations in ("bf16", "f32")


def _swiglu_prologues(model: Model, ops, uses, producer) -> dict[int, int]:
    """linear op index -> index of the swiglu it takes as its prologue (the module docstring's rule)."""
    out = {}
    for i, op in enumerate(ops):
        if op.name not in ("linear", "packed_linear"):
            continue
        j = producer.get(op.values[0])
        if (j is not None and ops[j].name == "swiglu" and uses.get(op.values[0]) == [i]
                and op.values[0] != model.graph.result and _triton_linear(model, op)):
            out[i] = j
    return out


def _linear_groups(model: Model, ops, fuse) -> dict[int, list[int]]:
    """First member's op index -> the op indices of its linear group (the module docstring's rule),
    formed in op order as the launches are."""
    groups, grouped = {}, set()
    for i, op in enumerate(ops):
        if op.name not in ("linear", "packed_linear") or i in grouped:
            continue
        members = [i] + [j for j in range(i + 1, len(ops))
                         if fuse["linear_groups"] and j not in grouped and _groups_with(model, op, ops[j])]
        grouped.update(members)
        groups[i] = members
    return groups


def _norm_prologues(model: Model, ops, uses, groups) -> dict[int, int]:
    """Group's first op index -> index of the rms_norm it takes as its prologue (norm_linear)."""
    leader_of = {tuple(members): first for first, members in groups.items()}
    out = {}
    for i, op in enumerate(ops):
        if op.name != "rms_norm" or op.attrs.get("group") or op.result == model.graph.result:
            continue
        first = leader_of.get(tuple(uses.get(op.result, ())))
        if first is not None and all(_triton_linear(model, ops[j]) for j in groups[first]):
            out[first] = i
    return out


def _residual_epilogues(model: Model, ops, uses, producer, groups) -> dict[int, tuple[int, str]]:
    """Lone linear's op index -> (index of the add it takes as its epilogue, the add's other operand)."""
    out = {}
    for i, op in enumerate(ops):
        if op.name != "add":
            continue
        for mine, other in ((op.values[0], op.values[1]), (op.values[1], op.values[0])):
            j = producer.get(mine)
            if (j is None or groups.get(j) != [j] or uses.get(mine) != [i] or mine == model.graph.result
                    or mine == other or not _triton_linear(model, ops[j]) or producer.get(other, -1) >= j):
                continue
            out[j] = (i, other)
            break
    return out


def _rope_epilogues(model: Model, ops, uses, groups, fused_rope) -> dict[int, int]:
    """Group's first op index -> index of the attention whose rope_kv_write runs in the group's
    epilogue (linear_rope_kv): the group's results are exactly (q, k, v) of that fused rope + KV
    write, in that order, nothing else reads them and every member runs on a Triton kernel."""
    leader_of = {tuple(ops[j].result for j in members): first for first, members in groups.items()}
    out = {}
    for i, (qi, ki) in fused_rope.items():
        q_lin, k_lin, v = ops[qi].values[0], ops[ki].values[0], ops[i].values[2]
        first = leader_of.get((q_lin, k_lin, v))
        if (first is not None and uses.get(q_lin) == [qi] and uses.get(k_lin) == [ki] and uses.get(v) == [i]
                and all(_triton_linear(model, ops[j]) for j in groups[first])):
            out[first] = i
    return out


def plan_program(model: Model) -> Program:
    if model.graph is None:
        raise SpecirError(f"model @{model.name} is not expanded", location=model.loc,
                          hint="load the pipeline with its models imported")
    ops = list(model.graph.ops)
    for op in ops:
        if op.name not in SUPPORTED_OPS:
            raise SpecirError(f"the triton backend has no kernel for op {op.name!r}", location=op.loc,
                              hint="supported: " + ", ".join(SUPPORTED_OPS))
    uses = _uses(ops)
    producer = {op.result: i for i, op in enumerate(ops) if op.result}
    values = {name: 0 for name, _ in model.graph.params}
    params = {}
    for name, type_ in model.graph.params:
        params[type_.name] = name
    for op in ops:
        if op.result:
            values[op.result] = op.type.width if op.type is not None and op.type.params else 0
    layers = {op.attrs["layer"]: (op.attrs["kv_heads"], op.attrs["head_dim"]) for op in ops if op.name == "attention"}

    fuse = fusions(model)
    done: set[int] = set()
    launches: list[Launch] = []
    fused_rope: dict[int, tuple[int, int]] = {}  # attention op index -> (q rope, k rope)
    for i, op in enumerate(ops):
        if op.name != "attention":
            continue
        q, k, _v, _mask = op.values
        qi, ki = producer.get(q), producer.get(k)
        if qi is None or ki is None:
            continue
        qop, kop = ops[qi], ops[ki]
        if (fuse["rope_kv_write"] and qop.name == "rope" and kop.name == "rope" and qop.attrs == kop.attrs
                and qop.values[1] == kop.values[1] and uses.get(q) == [i] and uses.get(k) == [i]):
            fused_rope[i] = (qi, ki)
    rope_in_fusion = {j for pair in fused_rope.values() for j in pair}
    prologue = _swiglu_prologues(model, ops, uses, producer) if fuse["swiglu_linear"] else {}
    swiglu_in_fusion = set(prologue.values())
    groups = _linear_groups(model, ops, fuse)
    norm_prologue = _norm_prologues(model, ops, uses, groups) if fuse["norm_linear"] else {}
    epilogue = _residual_epilogues(model, ops, uses, producer, groups) if fuse["norm_linear"] else {}
    in_linear = set(norm_prologue.values()) | {add for add, _ in epilogue.values()}
    rope_epilogue = _rope_epilogues(model, ops, uses, groups, fused_rope) if fuse["linear_rope_kv"] else {}
    rope_in_linear = set(rope_epilogue.values())  # attention ops whose rope_kv_write a linear launch does

    for i, op in enumerate(ops):
        if i in done or i in in_linear:
            continue
        name = op.name
        if name == "embed":
            launches.append(Launch("embed", (op.result,), op.values, {"weight": op.attrs["weight"]}, (op.result,)))
        elif name == "add":
            nxt = ops[i + 1] if i + 1 < len(ops) else None
            if (fuse["add_norm"] and nxt is not None and nxt.name == "rms_norm" and not nxt.attrs.get("group")
                    and nxt.values == (op.result,) and i + 1 not in in_linear):
                launches.append(Launch("add_rms_norm", (nxt.result, op.result), op.values,
                                       {"weight": nxt.attrs["weight"], "eps": float(nxt.attrs["eps"]),
                                        "fixed_order": fuse["norm_linear"]}, (op.result, nxt.result)))
                done.add(i + 1)
            else:
                launches.append(Launch("add", (op.result,), op.values, {}, (op.result,)))
        elif name == "rms_norm":
            launches.append(Launch("rms_norm", (op.result,), op.values,
                                   {"weight": op.attrs["weight"], "eps": float(op.attrs["eps"]),
                                    "group": int(op.attrs.get("group") or 0), "fixed_order": fuse["norm_linear"]},
                                   (op.result,)))
        elif name in ("linear", "packed_linear"):
            group = groups[i]
            done.update(group)
            members = [ops[j] for j in group]
            formats = {m.attrs["format"] for m in members if m.name == "packed_linear"}
            kind = "packed_linear" if formats else "linear"
            attrs = {"weights": tuple(m.attrs["weight"] for m in members),
                     "dtype": "bf16" if formats else _weight_dtype(model, op.attrs["weight"]),
                     "biases": tuple(m.attrs.get("bias") or "" for m in members),
                     "widths": tuple(values[m.result] for m in members)}
            if formats:
                attrs["format"] = formats.pop()
            if fuse["launch_overlap"]:
                attrs["overlap"] = True
            ins, implements, outs = op.values, tuple(m.result for m in members), tuple(m.result for m in members)
            if i in prologue:
                act = ops[prologue[i]]
                attrs.update(prologue="swiglu", prologue_value=act.result)
                ins, implements = act.values, (act.result, *implements)
            if i in norm_prologue:
                norm = ops[norm_prologue[i]]
                attrs.update(prologue="rms_norm", prologue_value=norm.result, norm_weight=norm.attrs["weight"],
                             eps=float(norm.attrs["eps"]))
                ins, implements = norm.values, (norm.result, *implements)
            if i in epilogue:
                add, residual = ops[epilogue[i][0]], epilogue[i][1]
                attrs.update(epilogue="add", epilogue_value=op.result, residual_value=residual)
                after = [ops[r].result for r in norm_prologue.values() if ops[r].values[0] == add.result]
                if after:  # a forward running both apart runs this add with that norm (forward.py)
                    attrs["then_norm"] = after[0]
                ins, implements, outs = (*ins, residual), (*implements, add.result), (add.result,)
            if i in rope_epilogue:
                att = ops[rope_epilogue[i]]
                qop, kop = (ops[j] for j in fused_rope[rope_epilogue[i]])
                layer = att.attrs["layer"]
                attrs.update(epilogue="rope_kv_write", rope=qop.attrs["rope"], layer=layer, heads=att.attrs["heads"],
                             kv_heads=att.attrs["kv_heads"], head_dim=att.attrs["head_dim"])
                # outs: the rotated q, in the q|k|v buffer's q columns (the group's first `widths` entry)
                ins, outs = (*ins, qop.values[1]), (qop.result,)
                implements = (*implements, qop.result, kop.result, f"kv_write[{layer}]")
            launches.append(Launch(kind, outs, ins, attrs, implements))
        elif name == "rope":
            if i in rope_in_fusion:
                continue  # emitted with its attention
            launches.append(Launch("rope", (op.result,), op.values,
                                   {"head_dim": op.attrs["head_dim"], "rope": op.attrs["rope"]}, (op.result,)))
        elif name == "attention":
            a = op.attrs
            q, k, v, mask = op.values
            common = {"layer": a["layer"], "heads": a["heads"], "kv_heads": a["kv_heads"],
                      "head_dim": a["head_dim"]}
            if i in rope_in_linear:
                pass  # the rope and KV write ran in the q|k|v linear's epilogue
            elif i in fused_rope:
                qi, ki = fused_rope[i]
                qop, kop = ops[qi], ops[ki]
                launches.append(Launch("rope_kv_write", (q,), (qop.values[0], kop.values[0], v, qop.values[1]),
                                       {**common, "rope": qop.attrs["rope"]}, (q, k, f"kv_write[{a['layer']}]")))
            else:
                launches.append(Launch("kv_write", (), (k, v), common, (f"kv_write[{a['layer']}]",)))
            launches.append(Launch("attention", (op.result,), (q, mask),
                                   {**common, "scale": float(a.get("scale") or 0.0),
                                    "window": int(a.get("window") or 0)}, (op.result,)))
        elif name == "swiglu":
            if i in swiglu_in_fusion:
                continue  # the prologue of its linear
            launches.append(Launch("swiglu", (op.result,), op.values, {}, (op.result,)))
        elif name in RECURRENT_OPS or name in HYBRID_NORMS or name in POINTWISE_OPS or name == "vocab_scatter":
            launches.append(Launch(name, (op.result,), op.values, dict(op.attrs), (op.result,)))
    if fuse["launch_overlap"] and fuse["attention_prefetch"]:
        _prefetch_after_attention(launches)
    policy = model.attrs.get("cublas_min_rows")
    states = [spec for op in ops for spec in state_specs(op)]
    return Program(model.name, launches, values, params, model.graph.result, layers, states=states,
                   dtype=str(model.attrs.get("dtype", "bf16")), cublas_min_rows=None if policy is None else int(policy))


def _prefetch_after_attention(launches: list[Launch]) -> None:
    """attention_prefetch: mark each attention launch whose output the next launch, an overlapped linear, reads."""
    for launch, nxt in zip(launches, launches[1:]):
        if (launch.kind == "attention" and nxt.kind in ("linear", "packed_linear") and nxt.attrs.get("overlap")
                and nxt.ins[:1] == launch.outs):
            launch.attrs["lets_next_start"] = True
            nxt.attrs["prefetch_weights"] = True


def prefetches_its_weights(launch: Launch, cfg, parts) -> bool:
    """attention_prefetch: whether linear `launch` prefetches its K range (linear_config.prefetching_its_range) in a
    forward that runs it with launch configuration `cfg` and runs its fused `parts` apart (fused_parts.parts_apart):
    where it is marked `prefetch_weights` and runs as a GEMV with its prologue inside (nothing launched between the
    attention and it). The forward and the build manifest (launch_configs.py) both ask this."""
    return bool(launch.attrs.get("prefetch_weights")) and cfg.kind == "gemv" and "prologue_value" not in parts


def joined_norms(program: Program, separate) -> dict[int, int]:
    """Epilogue launch -> the launch whose RMSNorm prologue computes its `then_norm`, where a forward
    runs both apart (`separate(j)`: launch j's fused prologue or epilogue runs as its own launch,
    fused_parts.parts_apart): that add and norm then run as one add_rms_norm launch."""
    norm_of = {launch.attrs["prologue_value"]: j for j, launch in enumerate(program.launches)
               if launch.attrs.get("prologue") == "rms_norm"}
    joined = {}
    for i, launch in enumerate(program.launches):
        j = norm_of.get(launch.attrs.get("then_norm"))
        if j is not None and separate(i) and separate(j):
            joined[i] = j
    return joined


def describe(program: Program) -> list[dict]:
    """One row per launch: the kernel, the IR values it implements (for manifests and benches)."""
    return [{"kernel": launch.kernel, "kind": launch.kind, "implements": list(launch.ops)}
            for launch in program.launches]
