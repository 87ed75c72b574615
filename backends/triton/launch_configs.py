"""Launch configurations of a Program on a GPU target, computed on any machine (no GPU needed).

Contract: `launch_configs(program, target, B, T, max_seq)` lists, per launch of one forward of
B requests x T new tokens over a `max_seq`-row cache, the kernel and the parameters the runtime
will use on `target`: grid, block sizes, warps, stages, split-K / split-KV counts. They are the
same functions the runtime calls (gemm_route.uses_cublas, linear_config.choose, attention_config,
argmax_config's rule), evaluated with the target's SM count; the only runtime input they lack is
the cache length of a real call (`max_seq`, here a representative value). A linear group that
runs cuBLAS at this row count is listed with kernel "cublas.linear" (see gemm_route.py); if it
has a SwiGLU prologue (program.py), a silu_mul row precedes it (that forward runs the swiglu
separately), and a Triton linear with one says `prologue = "swiglu"`. A Triton linear's norm_linear
prologue and add epilogue beyond one row are listed as their own rows too (fused_parts.py).
`packed=True`: a packed verify forward (specir/step/ragged.py) of B requests of at most T
one-token rows each; its attention runs grouped by request (kernels/attention.py: `grouped`
config, grid ((B + 1) * kv_heads, ...)) and its row says `grouped = true`.
"""
from __future__ import annotations

from dataclasses import asdict

import triton

from .fused_parts import parts_apart
from .gemm_route import CUBLAS_CALL, CUBLAS_KERNEL, cublas_min_rows, uses_cublas
from .kernels import argmax as argmax_mod
from .kernels.attention import attention_config
from .kernels.linear_config import choose, head_tiles, prefetching_its_range
from .kernels.rope_kv_epilogue import listed_in_gemv
from .program import KERNEL_OF, Program, joined_norms, prefetches_its_weights

REPRESENTATIVE_CONTEXT = 2048  # cached tokens the recorded launch configs and PTX assume


def _attention(B, T, H, KH, D, max_seq, sm_count, grouped: bool = False):
    """attention_config with the target's SM count (the runtime reads the device's)."""
    return attention_config(B, T, H, KH, D, max_seq, sm=sm_count, grouped=grouped)


def _argmax(rows, vocab, sm_count):
    block = min(argmax_mod.BLOCK, triton.next_power_of_2(vocab))
    chunks = max(1, min(triton.cdiv(4 * sm_count, rows), triton.cdiv(vocab, block), argmax_mod.MAX_CHUNKS))
    chunk = triton.cdiv(triton.cdiv(vocab, chunks), block) * block
    return {"grid": [rows, triton.cdiv(vocab, chunk)], "BLOCK": block, "chunk": chunk, "num_warps": 4}


def _elementwise(rows, width):
    block = min(1024, triton.next_power_of_2(width))
    return {"grid": [rows, triton.cdiv(width, block)], "BLOCK": block, "num_warps": 4}


def _separate_parts(launch, i: int, rows: int, k: int, joined: dict[int, int],
                    parts: list[str]) -> tuple[list[dict], list[dict]]:
    """The rows of a fused linear's prologue (before the call) and epilogue (after) that run apart
    (`parts`: fused_parts.parts_apart), as forward.py runs them: silu_mul or rms_norm into
    `prologue_value` (no norm where an earlier epilogue's add_rms_norm computed it: `joined`,
    program.joined_norms), add or add_rms_norm (with its `then_norm`) after."""
    a = launch.attrs
    before, after = [], []
    if "prologue_value" in parts and a.get("prologue") == "swiglu":
        before.append({"launch": i, "kernel": "activation.silu_mul", "implements": [a["prologue_value"]],
                       **_elementwise(rows, k)})
    elif "prologue_value" in parts and a.get("prologue") == "rms_norm" and i not in joined.values():
        before.append({"launch": i, "kernel": KERNEL_OF["rms_norm"], "implements": [a["prologue_value"]],
                       "rows": rows})
    if "epilogue_value" in parts and a.get("epilogue") == "add":
        together = i in joined
        after.append({"launch": i, "kernel": KERNEL_OF["add_rms_norm" if together else "add"],
                      "implements": [launch.outs[0], *([a["then_norm"]] if together else [])], "rows": rows})
    return before, after


def _moved(launch, before: list[dict], after: list[dict], parts: list[str]) -> set[str]:
    """The IR values of `launch` that its rows `before` and `after` implement (a prologue run apart: its
    own launch, or an earlier epilogue's add_rms_norm)."""
    moved = {v for r in before + after for v in r["implements"]}
    if "prologue_value" in parts:
        moved.add(launch.attrs["prologue_value"])
    return moved


def _separate_rope_kv(launch, i: int, rows: int) -> list[dict]:
    """The rope_kv_write row of a q|k|v linear whose epilogue runs as a launch of its own (any row
    count where rope_kv_epilogue.listed_in_gemv says no: forward.py; partial rotary and a BF12
    matrix with raw rows do so at one row too, which this listing, made without the weights and rope
    tables, does not know)."""
    if launch.attrs.get("epilogue") != "rope_kv_write":
        return []
    return [{"launch": i, "kernel": KERNEL_OF["rope_kv_write"], "implements": list(launch.ops[-3:]),
             "grid": [rows], "num_warps": 4}]


def _triton_linear(row: dict, launch, rows: int, n: int, k: int, fmt: str, joined: dict[int, int],
                   parts: list[str]) -> list[dict]:
    """The rows of a linear launch on a Triton kernel: its own (with the prologue and epilogue it folds),
    the rows of the parts it runs apart (`parts`: a norm_linear prologue and add beyond one row) and,
    where its rope + KV-write epilogue runs apart (`_separate_rope_kv`), that launch's."""
    a = launch.attrs
    cfg = choose(rows, n, k, fmt)
    before, after = _separate_parts(launch, row["launch"], rows, k, joined, parts)
    apart = [] if listed_in_gemv(rows, a.get("head_dim", 0)) else _separate_rope_kv(launch, row["launch"], rows)
    if a.get("epilogue") == "rope_kv_write" and not apart:   # one program per head (kernels/linear.py)
        cfg = head_tiles(cfg, a["head_dim"])
    if prefetches_its_weights(launch, cfg, parts):   # attention_prefetch: the forward's rule
        cfg = prefetching_its_range(cfg, k)
    row.update(m=rows, n=n, k=k, config=asdict(cfg))
    row.update({key: a[key] for key in ("prologue", "epilogue") if key in a and not (apart and key == "epilogue")
                and f"{key}_value" not in parts})
    moved = _moved(launch, before, after, parts) | {v for r in apart for v in r["implements"]}
    row["implements"] = [v for v in row["implements"] if v not in moved]
    return [*before, row, *apart, *after]


def _lets_next_start(program: Program, out: list[dict]) -> None:
    """attention_prefetch: an attention row says `lets_next_start` where the row after it is the GEMV that
    prefetches its range (forward.py: the same rule)."""
    for row, nxt in zip(out, out[1:]):
        if program.launches[row["launch"]].kind == "attention" and "B" in row:
            row["lets_next_start"] = bool(program.launches[row["launch"]].attrs.get("lets_next_start")
                                          and nxt["launch"] == row["launch"] + 1
                                          and nxt.get("config", {}).get("overlap_iters", 0) > 0)


def launch_configs(program: Program, target, B: int, T: int, max_seq: int, packed: bool = False) -> list[dict]:
    rows, out = B * T, []
    sm = target.sm_count
    joined = joined_norms(program, lambda j: bool(parts_apart(program, program.launches[j], rows)))
    for i, launch in enumerate(program.launches):
        kind, a = launch.kind, launch.attrs
        row = {"launch": i, "kernel": launch.kernel, "implements": list(launch.ops)}
        parts = parts_apart(program, launch, rows)
        if kind == "linear":
            n, k = sum(a["widths"]), program.values[launch.ins[0]]
            if uses_cublas(program, launch, rows):  # the fused parts as their own launches (forward.py)
                before, after = _separate_parts(launch, i, rows, k, joined, parts)
                after += _separate_rope_kv(launch, i, rows)  # (a group: no add epilogue beside it)
                out += before
                row["implements"] = [v for v in launch.ops if v not in _moved(launch, before, after, parts)]
                row.update(kernel=CUBLAS_KERNEL, m=rows, n=n, k=k,
                           config={"library": "cuBLAS", "call": CUBLAS_CALL, "min_rows": cublas_min_rows(program)})
                out.append(row)
                out += after
            else:
                out += _triton_linear(row, launch, rows, n, k, "bf16", joined, parts)
            continue
        elif kind == "packed_linear":
            n, k = sum(a["widths"]), program.values[launch.ins[0]]
            out += _triton_linear(row, launch, rows, n, k, "bf12", joined, parts)
            continue
        elif kind == "attention":
            tree_mask = launch.ins[1] == program.params.get("mask") and (T > 1 or packed)
            row.update(B=B, T=T, max_seq=max_seq, tree_mask=tree_mask,
                       config=_attention(B, T, a["heads"], a["kv_heads"], a["head_dim"], max_seq, sm,
                                         grouped=packed and tree_mask))
        elif kind in ("rms_norm", "add_rms_norm"):
            width = a["group"] if a.get("group") else program.values[launch.ins[0]]
            n_rows = rows * (program.values[launch.ins[0]] // width)
            block = triton.next_power_of_2(width)
            row.update(grid=[n_rows], BLOCK=block, num_warps=min(max(block // 512, 1), 16))
        elif kind in ("rope", "rope_kv_write", "kv_write"):
            row.update(grid=[rows], num_warps=4)
        elif kind == "conv1d":
            row.update(grid=[B, triton.cdiv(a["channels"], min(128, triton.next_power_of_2(a["channels"])))],
                       T=T, num_warps=4)
        elif kind == "gated_delta_rule":
            row.update(grid=[B, a["v_heads"], triton.cdiv(a["v_dim"], min(32, triton.next_power_of_2(a["v_dim"])))],
                       T=T, num_warps=4)
        elif kind == "mamba2_scan":
            row.update(grid=[B, a["heads"], triton.cdiv(a["head_dim"], min(16, triton.next_power_of_2(a["head_dim"])))],
                       T=T, num_warps=4)
        elif kind in ("embed", "swiglu", "add"):
            row.update(_elementwise(rows, program.values[launch.outs[0]]))
        out.append(row)
    _lets_next_start(program, out)
    vocab = program.values[program.result]
    out.append({"launch": len(program.launches), "kernel": "argmax.argmax", "implements": ["greedy target choice"],
                "config": _argmax(rows, vocab, sm)})
    return out
