"""One model forward at fixed shapes: buffers allocated once, every launch bound in advance.

Contract (docs/KERNEL_CONTRACTS.md, "One forward over new tokens"): `StaticForward(model, cache,
inputs)` binds the Program's launches to `inputs` (ids [B, T] int64, pos [B, T] int64, lens [B]
int32 committed rows per request, optional slots [B] int32, offsets [B] int32 and mask
[B, T, U] bool) and to the KV cache. `run()` launches them in order and returns the logits
buffer [B, T, V] (overwritten by the next run). New token t of request b is written to cache row
lens[b] + offsets[b] + t of slot slots[b]; `lens` is read, never changed.

A packed forward (inputs.row_start [R + 1], specir/step/ragged.py) runs its attention grouped by
request (kernels/attention.py: a request's KV read once for all its rows) and its pad rows (rows
>= row_start[R]) write no KV (kv_write / rope_kv_write `n_rows`) and get zero attention output.

A model with recurrent ops (program.states) needs a cache with a recurrent state store
(HybridCache): `run()` first claims the forward's scratch nodes (`RecurrentStates.begin`, token
parents from the mask, or the previous token without one) and every recurrent launch reads and
writes the store. The host-side capacity checks of `begin` run except while a CUDA graph is
being captured (the warm-up before a capture runs them).

`run()` allocates nothing, reads no device value on the host and takes the same kernels with
the same arguments every time, so it can be captured into a CUDA graph; its inputs are changed
by writing into the `inputs` tensors. Intermediate values share buffers by liveness (a buffer is
reused once every IR value living in it is dead), and a launch's scratch (split-KV attention
partials) lives for that launch only, so every layer's attention shares one workspace.

A linear launch with a SwiGLU prologue (program.py) runs as one Triton kernel (`up=`), or, when
this forward's rows route it to cuBLAS (gemm_route.py) or its weights cannot run Triton, as
silu_mul into a buffer for `prologue_value` (live for that launch only) and then the call. An
RMSNorm prologue (`norm=`) and a residual epilogue (`residual=`) go the same way: rms_norm into
`prologue_value`'s buffer, or the call into `epilogue_value`'s buffer and then the add.
"""
from __future__ import annotations

import torch
import triton

from specir.errors import SpecirError
from specir.step.forward_inputs import ForwardInputs  # noqa: F401 (re-exported)

from .add_kernel import add as add_kernel
from .kernels._interpreter_compat import interpreting
from .kernels.activation import silu_mul
from .gemm_route import CUBLAS_CALL, CUBLAS_KERNEL, uses_cublas
from .fused_parts import parts_apart
from .kernels.attention import attention, attention_config, counter_buffer
from .kernels.embedding import embedding
from .kernels.kv_cache import kv_write
from .kernels.linear import linear_bf12, linear_bf16
from .kernels.linear_config import choose, head_tiles, prefetching_its_range
from .kernels import pointwise
from .kernels.vocab_scatter import inverse_key, vocab_scatter
from .kernels.hybrid_norm import rms_norm_1p, rms_norm_gated
from .kernels.norm import add_rms_norm, rms_norm
from .kernels.rope import rope, rope_kv_write
from .kernels.rope_kv_epilogue import RopeKV, epilogue_runs_here
from .kernels.conv1d import conv1d_tree
from .kernels.delta_factors import attach_delta_factors
from .kernels.gated_delta import gated_delta_rule_tree
from .kernels.mamba2_scan import mamba2_scan_tree
from .program import HYBRID_NORMS, KERNEL_OF, POINTWISE_OPS, RECURRENT_OPS, joined_norms, prefetches_its_weights
from .weights import weight_names


def linear_config(m: int, n: int, k: int, fmt: str = "bf16"):
    """The linear kernels' launch configuration. In the CPU interpreter a GEMV/GEMM program costs
    the same Python time whatever its width, so programs are made wide (one per 256 rows); on a
    GPU the kernel library's table decides."""
    cfg = choose(m, n, k, fmt)
    if interpreting():
        from dataclasses import replace
        cfg = replace(cfg, block_n=min(256, max(32, triton.next_power_of_2(n))), split=1)
    return cfg


class _Pool:
    """Free buffers by (numel, dtype)."""

    def __init__(self, device):
        self.device, self.free, self.allocated = device, {}, 0

    def take(self, numel: int, dtype) -> torch.Tensor:
        stack = self.free.get((numel, dtype))
        if stack:
            return stack.pop()
        self.allocated += numel * torch.tensor([], dtype=dtype).element_size()
        return torch.empty(numel, dtype=dtype, device=self.device)

    def give(self, buf: torch.Tensor) -> None:
        self.free.setdefault((buf.numel(), buf.dtype), []).append(buf)


class SharedPool(_Pool):
    """Buffers shared by every forward planned from it, which must never run at the same time and
    keep no value from one run to the next (cache-only forwards: prefills). `take` hands out a
    view of the smallest free buffer that holds `numel` (allocating one only when none does), and
    a forward gives every buffer back once planned (`release`), so the next forward reuses them:
    its memory is the largest forward's, not the sum over shapes."""

    def __init__(self, device):
        super().__init__(device)
        self.bases: dict[int, torch.Tensor] = {}  # id(view) -> its buffer

    def take(self, numel: int, dtype) -> torch.Tensor:
        fits = [(n, i) for (n, d), stack in self.free.items() if d == dtype and n >= numel
                for i in range(len(stack))]
        if fits:
            n, i = min(fits)
            base = self.free[(n, dtype)].pop(i)
        else:
            self.allocated += numel * torch.tensor([], dtype=dtype).element_size()
            base = torch.empty(numel, dtype=dtype, device=self.device)
        view = base[:numel]
        self.bases[id(view)] = base
        return view

    def give(self, buf: torch.Tensor) -> None:
        base = self.bases.pop(id(buf), buf)
        super().give(base)

    def release(self, bufs) -> None:
        for buf in bufs:
            self.give(buf)


IMPURE = ("kv_write", "rope_kv_write", "attention", *RECURRENT_OPS)  # launches that write the KV cache or state


def cache_launches(program) -> set[int]:
    """Indices of the launches a forward needs when only its cache writes matter (no logits): the
    cache-writing launches and everything they depend on."""
    needed, keep = set(), set()
    for i in range(len(program.launches) - 1, -1, -1):
        launch = program.launches[i]
        if launch.kind in IMPURE or launch.attrs.get("epilogue") == "rope_kv_write" or needed.intersection(launch.outs):
            keep.add(i)
            needed.update(launch.ins)
    return keep


class StaticForward:
    def __init__(self, model, cache, inputs: ForwardInputs, logits: bool = True, pool: SharedPool | None = None):
        """`model`: a CompiledModel (program, prepared weights, rope tables, dtype). `logits=False`:
        only what writes the cache runs (a prefill), and `run()` returns None; its intermediates may
        then come from a `pool` shared with other such forwards (SharedPool: one runs at a time)."""
        self.model, self.cache, self.inputs = model, cache, inputs
        program = model.program
        B, T = inputs.ids.shape
        self.B, self.T = B, T
        self.device, self.dtype = inputs.ids.device, model.dtype
        self.configs: list[dict] = []  # launch configuration per launch (manifest / bench)
        params = program.params
        self.views: dict[str, torch.Tensor] = {}
        self.static = all(table.static for table in model.ropes.values())
        if pool is not None and logits:
            raise ValueError("a forward that returns logits keeps them between runs: it cannot share its buffers")
        shared, pool = pool, pool or _Pool(self.device)
        allocated_before = pool.allocated
        last_use: dict[str, int] = {}
        for i, launch in enumerate(program.launches):
            for v in launch.ins:
                last_use[v] = i
        last_use[program.result] = len(program.launches)
        holders: dict[int, tuple[torch.Tensor, set]] = {}  # buffer id -> (buffer, live values)
        value_buffer: dict[str, int] = {}

        def allocate(names, widths):
            total = sum(widths)
            buf = pool.take(B * T * total, self.dtype)
            base = buf.view(B, T, total)
            off = 0
            for name, width in zip(names, widths):
                self.views[name] = base[..., off:off + width]
                value_buffer[name] = id(buf)
                off += width
            holders[id(buf)] = (buf, set(names))

        self.calls = []
        self._pool, self._scratches = pool, []
        self._early_norms: dict[str, int] = {}  # set by _plan: norm value -> its prologue's launch (joined_norms)
        self._fixed_norms = True  # set by _plan: whether the norms' fixed_order applies in this forward
        self._per_run: list = []  # set by _plan: what each run recomputes first (dynamic rope frequencies)
        try:
            self._plan(program, params, pool, logits, allocate, last_use, holders, value_buffer)
        except BaseException:
            if shared is not None:  # a forward that cannot be planned keeps nothing of the shared pool
                shared.release([buf for buf, live in holders.values() if live] + self._scratches)
            raise
        self.recurrent = None  # this run's RecurrentForward (recurrent programs)
        self.packed = None  # this run's packed rows regrouped per request (a packed forward of a recurrent program)
        self.logits = self.views.get(program.result) if logits else None
        self.buffer_bytes = pool.allocated - allocated_before
        if shared is not None:  # nothing outlives a run: the next forward planned may reuse all of it
            shared.release(buf for buf, live in holders.values() if live)

    def _plan(self, program, params, pool, logits, allocate, last_use, holders, value_buffer) -> None:
        """Bind every launch of the program, in order, to buffers from `pool` (see __init__)."""
        wanted = None if logits else cache_launches(program)
        joined = joined_norms(program, lambda j: (wanted is None or j in wanted)
                              and bool(self._separate_parts(j, program.launches[j])))
        self._early_norms = {program.launches[j].attrs["prologue_value"]: j for j in joined.values()}
        # the norms' `fixed_order` (program.py: norm_linear) holds unless the program folds norms into linears
        # and this forward folds none (fused_parts.parts_apart: every such linear on cuBLAS or torch, or more
        # than one row): then the faster order, as without the fusion
        folding = [not self._separate_parts(j, launch) for j, launch in enumerate(program.launches)
                   if launch.attrs.get("prologue") == "rms_norm" and (wanted is None or j in wanted)]
        self._fixed_norms = not folding or any(folding)
        for i, launch in enumerate(program.launches):
            if wanted is not None and i not in wanted:
                continue
            kind = launch.kind
            dead = set(launch.ins)
            if kind in ("linear", "packed_linear"):
                allocate(launch.outs, launch.attrs["widths"])
                parts = self._separate_parts(i, launch)
                for key in parts:  # values materialised for this launch only
                    value = launch.attrs[key]
                    dead.add(value)
                    if value not in self._early_norms:  # (else allocated by the launch that computes it)
                        allocate([value], [program.values[value]])
                        last_use[value] = i
                if i in joined:  # the norm of launch joined[i], computed here with the add, read there
                    then = launch.attrs["then_norm"]
                    allocate([then], [program.values[then]])
                    last_use[then] = joined[i]
            elif launch.outs:
                for name in launch.outs:
                    allocate([name], [program.values[name]])
            self.calls.append(self._bind(i, launch, params))
            for buf in self._scratches:  # live during this launch only: later launches may reuse it
                pool.give(buf)
            self._scratches = []
            for v in dead:
                if last_use.get(v) == i and v in value_buffer:
                    buf, live = holders[value_buffer[v]]
                    live.discard(v)
                    if not live:
                        pool.give(buf)

    # ------------------------------------------------------------------ binding
    def _scratch(self, numel: int, dtype) -> torch.Tensor:
        """A buffer the launch being bound uses as scratch (nothing in it outlives the launch): from
        the forward's pool, given back once the launch is bound, so every layer shares one."""
        buf = self._pool.take(numel, dtype)
        self._scratches.append(buf)
        return buf

    def _separate_parts(self, index: int, launch) -> list[str]:
        """The attributes naming the values (`prologue_value`, `epilogue_value`) that this forward
        stores because it runs `launch`'s prologue or epilogue as launches of their own
        (fused_parts.parts_apart: a linear on torch or cuBLAS; norm_linear's parts beyond one row)."""
        if launch.kind not in ("linear", "packed_linear"):
            return []
        on_torch = launch.kind == "linear" and not self.model.weights.linear[index][2]
        return parts_apart(self.model.program, launch, self.B * self.T, on_torch)

    def _gemv_prefetches(self, index: int) -> bool:
        """Whether launch `index` (the one after an attention) prefetches its weights in this forward (program.py:
        prefetches_its_weights): then that attention lets it start at once."""
        launches = self.model.program.launches
        if index >= len(launches) or not launches[index].attrs.get("prefetch_weights"):
            return False
        launch, rows = launches[index], self.B * self.T
        if launch.kind == "linear":
            weight, _, use_triton = self.model.weights.linear[index]
            if not use_triton or uses_cublas(self.model.program, launch, rows):
                return False
            fmt = "bf16"
        else:
            weight, fmt = self.model.weights.packed[index][0], "bf12"
        n, k = weight.shape
        return prefetches_its_weights(launch, linear_config(rows, n, k, fmt), self._separate_parts(index, launch))

    @staticmethod
    def _prefetching(launch, cfg, parts, k: int):
        """`cfg`, prefetching its K range before its wait where program.prefetches_its_weights says so."""
        return prefetching_its_range(cfg, k) if prefetches_its_weights(launch, cfg, parts) else cfg

    def _fused_operands(self, launch) -> dict:
        """The linear call's prologue, epilogue and overlap keyword arguments (kernels/linear.py)."""
        a, view = launch.attrs, self.views.get
        out = {}
        if a.get("prologue") == "swiglu":
            out["up"] = view(launch.ins[1])  # x (ins[0]) is then the gate
        elif a.get("prologue") == "rms_norm":
            out["norm"] = (self.model.weights.table[a["norm_weight"]], a["eps"])
        if a.get("epilogue") == "add":
            out["residual"] = view(a["residual_value"])
        if a.get("overlap"):
            out["overlap"] = True
        if a.get("epilogue") == "rope_kv_write":
            out["rope_kv"] = self._rope_kv(launch)
        return out

    def _rope_kv(self, launch) -> RopeKV:
        """The rope + KV write a q|k|v linear does in its epilogue (program.py: linear_rope_kv)."""
        a, inp = launch.attrs, self.inputs
        table = self.model.rope_table(a["rope"], a["head_dim"])
        k_cache, v_cache = self.cache.layer(a["layer"])
        r = RopeKV(a["heads"], a["kv_heads"], inp.pos, table.inv_freq(inp.pos), table.attention_factor,
                   k_cache, v_cache, inp.lens, inp.slots, inp.offsets, self._real_rows())
        if not table.static:  # dynamic / longrope: frequencies of this run's positions, as the rope launches
            def refresh():
                r.inv_freq, r.attention_scaling = table.inv_freq(inp.pos), table.attention_factor
            self._per_run.append(refresh)
        return r

    def _rope_kv_after(self, index: int, out: torch.Tensor, r: RopeKV):
        """rope_kv_write over the q|k|v buffer `out` [B, T, (H + 2 KH) D], q rotated in place: the
        epilogue as a launch of its own, where the linear cannot run it."""
        d, h, kh = r.head_dim, r.heads, r.kv_heads
        q = out[..., : h * d].unflatten(-1, (h, d))
        k = out[..., h * d: (h + kh) * d].unflatten(-1, (kh, d))
        v = out[..., (h + kh) * d:].unflatten(-1, (kh, d))
        self.configs.append({"launch": index, "kernel": KERNEL_OF["rope_kv_write"], "grid": [self.B * self.T]})
        return lambda: rope_kv_write(q, k, v, r.pos, r.inv_freq, r.k_cache, r.v_cache, r.lens, r.attention_scaling,
                                     q_out=q, slots=r.slots, offsets=r.offsets, n_rows=r.n_rows)

    @staticmethod
    def _as_run(cfg, fused: dict):
        """The configuration the call runs (kernels/linear.py: one head a program with the rope epilogue)."""
        r = fused.get("rope_kv")
        return cfg if r is None else head_tiles(cfg, r.head_dim)

    @staticmethod
    def _unfused_rope_kv(fused: dict, rows: int, n: int, raw_rows: int) -> RopeKV | None:
        """The RopeKV the GEMV cannot run in its epilogue at this call (removed from `fused`: it runs
        as a launch after the linear), or None."""
        r = fused.get("rope_kv")
        if r is None or (r.why_not_fused(rows, n, raw_rows) is None and epilogue_runs_here(r.k_cache.device)):
            return None
        return fused.pop("rope_kv")

    @staticmethod
    def _fusion_note(launch, epilogue_fused: bool = True, parts=()) -> dict:
        """The launch's fused parts as this forward runs them (none of those in `parts`, run apart)."""
        a = launch.attrs
        note = {key: a[key] for key in ("prologue", "epilogue", "overlap") if key in a}
        if not epilogue_fused or "epilogue_value" in parts:
            note.pop("epilogue")
        if "prologue_value" in parts:
            note.pop("prologue")
        return note

    def _with_rope_after(self, index: int, call, out: torch.Tensor, r: RopeKV | None):
        """`call`, then the rope_kv_write its GEMV could not run in its epilogue (`r`), if any."""
        if r is None:
            return call
        after = self._rope_kv_after(index, out, r)
        return lambda: (call(), after())

    def _parts_around(self, index, launch, x, fused, out, parts):
        """The fused parts `parts` (`_separate_parts`) of a linear launch as launches of their own:
        (first, x, out, after): its prologue into `prologue_value`'s buffer (None where an earlier
        add_rms_norm wrote it) and the linear's input then, the buffer the linear writes (the add
        epilogue's `epilogue_value`) and the add after it as (call, configs row) for `_recorded`,
        or None. Those parts leave `fused`."""
        a, m, B, T = launch.attrs, self.model, self.B, self.T
        first = after = None
        if "prologue_value" in parts and "up" in fused:
            act = self.views[a["prologue_value"]]
            first, x = self._silu_mul_call(index, x, fused.pop("up"), act), act
        elif "prologue_value" in parts and "norm" in fused:
            normed, (norm_w, eps), h = self.views[a["prologue_value"]], fused.pop("norm"), x
            if a["prologue_value"] not in self._early_norms:  # (else an earlier launch's add_rms_norm wrote it)
                self.configs.append({"launch": index, "kernel": KERNEL_OF["rms_norm"], "rows": B * T})
                fixed = self._fixed_norms
                first = lambda: rms_norm(h, norm_w, eps, out=normed, fixed_order=fixed)  # noqa: E731
            x = normed
        if "epilogue_value" in parts and "residual" in fused:
            product, residual, total = self.views[a["epilogue_value"]], fused.pop("residual"), out
            then = a.get("then_norm")
            if then in self._early_norms:
                consumer = self.model.program.launches[self._early_norms[then]].attrs
                norm_w, eps, normed = m.weights.table[consumer["norm_weight"]], consumer["eps"], self.views[then]
                fixed = self._fixed_norms
                after = (lambda: add_rms_norm(product, residual, norm_w, eps, out=normed, residual_out=total,
                                              fixed_order=fixed),
                         {"launch": index, "kernel": KERNEL_OF["add_rms_norm"], "rows": B * T})
            else:
                after = (lambda: add_kernel(residual, product, out=total),
                         {"launch": index, "kernel": KERNEL_OF["add"], "rows": B * T})
            out = product
        return first, x, out, after

    def _recorded(self, part):
        """A part's call (None for none), its configs row recorded now: after the linear's, in launch order."""
        if part is None:
            return None
        call, row = part
        self.configs.append(row)
        return call

    @staticmethod
    def _in_order(*calls):
        """One call running `calls` (None: none) in order."""
        steps = [f for f in calls if f is not None]
        return steps[0] if len(steps) == 1 else lambda: [f() for f in steps]

    def _separate_linear(self, index, launch, x, fused, out, weight, bias, use_triton):
        """A fused linear launch that this forward runs on cuBLAS (or torch): its prologue and add
        epilogue apart (`_parts_around`), or the call into the q|k|v buffer then the rope_kv_write."""
        first, x, out, after = self._parts_around(index, launch, x, fused, out, self._separate_parts(index, launch))
        n, k = weight.shape
        kernel = CUBLAS_KERNEL if use_triton else CUBLAS_CALL
        self.configs.append({"launch": index, "kernel": kernel, "call": CUBLAS_CALL, "m": self.B * self.T, "n": n,
                             "k": k})
        if "rope_kv" in fused:  # (a group: no residual epilogue here)
            last = self._rope_kv_after(index, out, fused["rope_kv"])
        else:
            last = self._recorded(after)
        if out.is_contiguous():
            call = lambda: torch.nn.functional.linear(x, weight, bias, out=out)  # noqa: E731
        else:
            call = lambda: out.copy_(torch.nn.functional.linear(x, weight, bias))  # noqa: E731
        return self._in_order(first, call, last)

    def _silu_mul_call(self, index: int, gate, up, out):
        self.configs.append({"launch": index, "kernel": "activation.silu_mul", "rows": self.B * self.T})
        fused = self._adjacent(gate, up)
        if fused is not None:
            return lambda: silu_mul(fused, out=out)
        return lambda: silu_mul(gate, up, out=out)

    def _bind(self, index: int, launch, params):
        kind, a, inp, m = launch.kind, launch.attrs, self.inputs, self.model
        B, T = self.B, self.T
        view = self.views.get
        if kind == "embed":
            ids, table, out = inp.ids, m.weights.table[a["weight"]], view(launch.outs[0])
            self.configs.append({"launch": index, "kernel": launch.kernel, "grid": [B * T]})
            return lambda: embedding(ids, table, out=out)
        if kind == "rms_norm":
            x, w, out, eps, group = view(launch.ins[0]), m.weights.table[a["weight"]], view(launch.outs[0]), \
                a["eps"], a["group"]
            if group:
                width = x.shape[-1]
                x = x.unflatten(-1, (width // group, group))
                out = out.view(B, T, width // group, group)
            self.configs.append({"launch": index, "kernel": launch.kernel, "rows": B * T, "group": group})
            fixed = bool(a.get("fixed_order")) and self._fixed_norms
            return lambda: rms_norm(x, w, eps, out=out, fixed_order=fixed)
        if kind == "add_rms_norm":
            a_in, b_in = view(launch.ins[0]), view(launch.ins[1])
            norm_out, res_out = view(launch.outs[0]), view(launch.outs[1])
            w, eps = m.weights.table[a["weight"]], a["eps"]
            self.configs.append({"launch": index, "kernel": launch.kernel, "rows": B * T})
            fixed = bool(a.get("fixed_order")) and self._fixed_norms
            return lambda: add_rms_norm(b_in, a_in, w, eps, out=norm_out, residual_out=res_out, fixed_order=fixed)
        if kind == "add":
            x, y, out = view(launch.ins[0]), view(launch.ins[1]), view(launch.outs[0])
            self.configs.append({"launch": index, "kernel": launch.kernel, "rows": B * T})
            return lambda: add_kernel(x, y, out=out)
        if kind == "linear":
            weight, bias, use_triton = m.weights.linear[index]
            x, fused = view(launch.ins[0]), self._fused_operands(launch)
            n, k = weight.shape
            out = self._group_output(launch)
            if not use_triton or uses_cublas(m.program, launch, B * T):
                return self._separate_linear(index, launch, x, fused, out, weight, bias, use_triton)
            parts = self._separate_parts(index, launch)
            cfg = self._prefetching(launch, linear_config(B * T, n, k), parts, k)
            first, x, y, add = self._parts_around(index, launch, x, fused, out, parts)
            after = self._unfused_rope_kv(fused, B * T, n, 0)
            self.configs.append({"launch": index, "kernel": launch.kernel, "m": B * T, "n": n, "k": k,
                                 "config": self._as_run(cfg, fused).__dict__,
                                 **self._fusion_note(launch, after is None, parts)})
            call = lambda: linear_bf16(x, weight, bias, out=y, config=cfg, **fused)  # noqa: E731
            return self._in_order(first, self._with_rope_after(index, call, out, after), self._recorded(add))
        if kind == "packed_linear":
            packed, bias = m.weights.packed[index]
            x, out, fused = view(launch.ins[0]), self._group_output(launch), self._fused_operands(launch)
            n, k = packed.shape
            parts = self._separate_parts(index, launch)
            cfg = self._prefetching(launch, linear_config(B * T, n, k, "bf12"), parts, k)
            first, x, y, add = self._parts_around(index, launch, x, fused, out, parts)
            after = self._unfused_rope_kv(fused, B * T, n, packed.raw_row_count)
            self.configs.append({"launch": index, "kernel": launch.kernel, "m": B * T, "n": n, "k": k,
                                 "config": self._as_run(cfg, fused).__dict__,
                                 **self._fusion_note(launch, after is None, parts)})
            call = lambda: linear_bf12(x, packed, bias, out=y, config=cfg, **fused)  # noqa: E731
            return self._in_order(first, self._with_rope_after(index, call, out, after), self._recorded(add))
        if kind == "rope":
            hd = a["head_dim"]
            table = m.rope_table(a["rope"], hd)
            x = view(launch.ins[0]).unflatten(-1, (-1, hd))
            out = view(launch.outs[0]).unflatten(-1, (-1, hd))
            junk = torch.empty_like(out)
            pos = inp.pos
            self.configs.append({"launch": index, "kernel": launch.kernel, "grid": [B * T]})
            return lambda: rope(x, x, pos, table.inv_freq(pos), table.attention_factor, q_out=out, k_out=junk)
        if kind == "rope_kv_write":
            hd, layer = a["head_dim"], a["layer"]
            table = m.rope_table(a["rope"], hd)
            q, k, v = (view(name).unflatten(-1, (-1, hd)) for name in launch.ins[:3])
            q_out = view(launch.outs[0]).unflatten(-1, (-1, hd))
            k_cache, v_cache = self.cache.layer(layer)
            pos, lens, slots, offsets, n_rows = inp.pos, inp.lens, inp.slots, inp.offsets, self._real_rows()
            self.configs.append({"launch": index, "kernel": launch.kernel, "grid": [B * T]})
            return lambda: rope_kv_write(q, k, v, pos, table.inv_freq(pos), k_cache, v_cache, lens,
                                         table.attention_factor, q_out=q_out, slots=slots, offsets=offsets,
                                         n_rows=n_rows)
        if kind == "kv_write":
            hd, layer = a["head_dim"], a["layer"]
            k, v = (view(name).unflatten(-1, (-1, hd)) for name in launch.ins[:2])
            k_cache, v_cache = self.cache.layer(layer)
            lens, slots, offsets, n_rows = inp.lens, inp.slots, inp.offsets, self._real_rows()
            self.configs.append({"launch": index, "kernel": launch.kernel, "grid": [B * T]})
            return lambda: kv_write(k_cache, v_cache, k, v, lens, slots=slots, offsets=offsets, n_rows=n_rows)
        if kind == "attention":
            H, KH, D, layer = a["heads"], a["kv_heads"], a["head_dim"], a["layer"]
            k_cache, v_cache = self.cache.layer(layer)
            max_seq = k_cache.shape[2]
            window = a["window"] if a["window"] and a["window"] < max_seq else 0  # (a longer window hides nothing)
            q = view(launch.ins[0]).unflatten(-1, (H, D))
            out = view(launch.outs[0]).unflatten(-1, (H, D))
            mask = inp.mask if launch.ins[1] == params.get("mask") else None
            if mask is not None and mask.shape[2] < T:
                raise ValueError(f"mask width {mask.shape[2]} < T = {T}")
            row_start = inp.row_start if mask is not None else None  # grouped by request (a packed forward)
            requests, nodes = (B, T) if row_start is None else (row_start.numel() - 1, mask.shape[2])
            cfg = attention_config(requests, nodes, H, KH, D, max_seq, self.device, grouped=row_start is not None)
            workspace = None
            if cfg["num_splits"] > 1:  # scratch of this launch only: the next layer's attention reuses it
                workspace = self._scratch(B * T * H * cfg["num_splits"] * (D + 1), torch.float32)
                counter_buffer(self.device, cfg["m_blocks"] * cfg["grid"][0])  # allocated now, never in a capture
            lens, slots, offsets, scale = inp.lens, inp.slots, inp.offsets, a["scale"] or None
            lets = bool(a.get("lets_next_start")) and self._gemv_prefetches(index + 1)
            self.configs.append({"launch": index, "kernel": launch.kernel, "B": B, "T": T, "max_seq": max_seq,
                                 "config": dict(cfg), "tree_mask": mask is not None, "lets_next_start": lets,
                                 **({"requests": requests} if row_start is not None else {})})
            over = {key: cfg[key] for key in ("num_splits", "block_m", "block_n", "min_chunk", "num_warps",
                                              "num_stages", "merge_rows", "merge_splits")}
            if window and mask is not None and window <= nodes:
                raise SpecirError(f"layer {layer} has a sliding window of {window} rows, no longer than the "
                                  f"{nodes}-node tree this forward verifies",
                                  hint="verify a smaller tree (tree-verify{budget=...})")
            pos = inp.pos if window else None
            return lambda: attention(q, k_cache, v_cache, lens, mask, scale, out=out, workspace=workspace, slots=slots,
                                     offsets=offsets, pos=pos, window=window, row_start=row_start,
                                     lets_next_start=lets, **over)
        if kind == "swiglu":
            return self._silu_mul_call(index, view(launch.ins[0]), view(launch.ins[1]), view(launch.outs[0]))
        if kind in HYBRID_NORMS:
            return self._bind_hybrid_norm(index, launch)
        if kind in POINTWISE_OPS:
            return self._bind_pointwise(index, launch)
        if kind in RECURRENT_OPS:
            return self._bind_recurrent(index, launch)
        if kind == "vocab_scatter":
            x, out, inverse = view(launch.ins[0]), view(launch.outs[0]), m.weights.table[inverse_key(a["ids"])]
            self.configs.append({"launch": index, "kernel": launch.kernel, "rows": self.B * self.T})
            return lambda: vocab_scatter(x, inverse, out=out)
        raise SpecirError(f"no Triton launch for {kind!r}")

    def _real_rows(self) -> torch.Tensor | None:
        """A packed forward's real row count on the device (row_start[R]: rows past it are pad rows,
        whose KV writes are dropped), or None."""
        start = self.inputs.row_start
        return None if start is None else start[-1:]

    def _params(self, launch) -> dict:
        """The launch's attributes with the weights it names resolved (as the reference runner)."""
        table = self.model.weights.table
        return {**launch.attrs, **{k: table[name] for k, name in weight_names(launch).items()}}

    def _bind_hybrid_norm(self, index: int, launch):
        a, weight = launch.attrs, self._params(launch)["weight"]
        x, out = self.views[launch.ins[0]], self.views[launch.outs[0]]
        group = a.get("group") or None
        self.configs.append({"launch": index, "kernel": launch.kernel, "rows": self.B * self.T, "group": group})
        if launch.kind == "rms_norm_1p":
            return lambda: rms_norm_1p(x, weight, a["eps"], group, out=out)
        gate = self.views[launch.ins[1]]
        return lambda: rms_norm_gated(x, gate, weight, a["eps"], group, bool(a.get("gate_first")), out=out)

    def _bind_pointwise(self, index: int, launch):
        a = launch.attrs
        ins, out = [self.views[v] for v in launch.ins], self.views[launch.outs[0]]
        self.configs.append({"launch": index, "kernel": launch.kernel, "rows": self.B * self.T})
        if launch.kind == "activation":
            return lambda: pointwise.activation(ins[0], a["fn"], out=out)
        if launch.kind == "mul":
            return lambda: pointwise.mul(ins[0], ins[1], out=out)
        if launch.kind == "slice":
            return lambda: pointwise.slice_(ins[0], a["start"], a["size"], a.get("group") or None, out=out)
        if launch.kind == "concat":
            return lambda: pointwise.concat(*ins, out=out)
        vector = None
        if a.get("segments"):
            vector = torch.repeat_interleave(torch.tensor([float(f) for f in a["factors"]]),
                                             torch.tensor([int(n) for n in a["segments"]])).to(out.device, out.dtype)
        factor, divisor = (1.0 if a.get(k) is None else float(a[k]) for k in ("factor", "divisor"))
        return lambda: pointwise.scale(ins[0], factor, divisor, vector, out=out)

    def _bind_recurrent(self, index: int, launch):
        if getattr(self.cache, "recurrent", None) is None:
            raise SpecirError(f"@{self.model.name} has recurrent layers but its cache has no recurrent state store",
                              hint="make the cache with the model's new_cache()")
        kind, a, p = launch.kind, launch.attrs, self._params(launch)
        ins, out = [self.views[v] for v in launch.ins[:-1]], self.views[launch.outs[0]]  # the last operand: the mask
        if self.inputs.row_start is not None:  # a packed forward: the op runs per request (packed_recurrent.py)
            return self._packed_recurrent(index, launch, ins, out)
        self.configs.append({"launch": index, "kernel": launch.kernel, "B": self.B, "T": self.T})
        return self._recurrent_call(kind, a, p, ins, out)

    def _packed_recurrent(self, index: int, launch, ins, out):
        """The recurrent launch of a packed forward over the per-request layout [R, N]: the rows are
        scattered into padded buffers (the model's packed_buffers: one per role and width, shared by
        every recurrent launch and forward size, which run one at a time), the op runs there with this
        run's RecurrentForward, and its output is gathered back to the rows."""
        R, N = self.inputs.row_start.shape[0] - 1, self.inputs.mask.shape[-1]
        shared = self.model.packed_buffers

        def buffer(role, rows, like):
            key = (role, rows, like.shape[-1], like.dtype)
            if key not in shared:
                shared[key] = torch.zeros(rows, like.shape[-1], dtype=like.dtype, device=like.device)
            return shared[key]
        buffers = [buffer(i, R * N + 1, x) for i, x in enumerate(ins)]
        padded = [buf[: R * N].view(R, N, -1) for buf in buffers]
        padded_out = buffer("out", R * N, out).view(R, N, -1)
        self.configs.append({"launch": index, "kernel": launch.kernel, "B": R, "T": N, "packed_rows": self.B})
        call = self._recurrent_call(launch.kind, launch.attrs, self._params(launch), padded, padded_out)

        def run():
            for x, buf in zip(ins, buffers):
                self.packed.pad_into(buf, x)
            call()
            out.copy_(self.packed.unpad(padded_out))
        return run

    def _recurrent_call(self, kind, a, p, ins, out):
        if kind == "conv1d":
            key = (a["layer"], a.get("state") or "conv")
            return lambda: conv1d_tree(ins[0], p["weight"], p.get("bias"), self.recurrent, key,
                                       activation=a.get("activation", "none"), out=out)
        if kind == "gated_delta_rule":
            key = (a["layer"], a.get("state") or "delta")
            attach_delta_factors(self.cache.recurrent, key)  # tree forwards keep WY factors, not states
            return lambda: gated_delta_rule_tree(*ins, p["a_log"], p["dt_bias"], self.recurrent, key,
                                                 k_heads=a["k_heads"], v_heads=a["v_heads"], k_dim=a["k_dim"],
                                                 v_dim=a["v_dim"], out=out)
        key = (a["layer"], a.get("state") or "ssm")
        return lambda: mamba2_scan_tree(*ins, p["a_log"], p["d"], p["dt_bias"], self.recurrent, key,
                                        heads=a["heads"], head_dim=a["head_dim"], groups=a["groups"],
                                        state_size=a["state_size"], dt_min=float(a.get("dt_min", 0.0)),
                                        dt_max=float(a.get("dt_max", float("inf"))), out=out)

    def _begin_recurrent(self) -> None:
        """Claim this forward's scratch nodes: token t of request b is node offsets[b] + t, its
        parent the nearest earlier node its mask shows (without a mask: the token before)."""
        from specir.runtime.packed_recurrent import begin_packed
        from specir.runtime.recurrent_state import tree_parents
        inp, B, T = self.inputs, self.B, self.T
        dev = inp.ids.device
        slots = torch.arange(B, device=dev) if inp.slots is None else inp.slots.long()
        offsets = torch.zeros(B, dtype=torch.long, device=dev) if inp.offsets is None else inp.offsets.long()
        capturing = dev.type == "cuda" and torch.cuda.is_current_stream_capturing()
        if inp.row_start is not None:  # a packed forward: its rows regrouped per request (packed_recurrent.py)
            self.packed, self.recurrent = begin_packed(self.cache.recurrent, slots, offsets, inp.mask, inp.row_start,
                                                       chain=False if capturing else None, check=not capturing)
            return
        if inp.mask is not None:
            parents = tree_parents(inp.mask, offsets)
        else:
            parents = offsets[:, None] + torch.arange(T, device=dev)[None, :] - 1
        chain = True if inp.mask is None else (False if capturing else None)  # False: parents read from scratch
        self.recurrent = self.cache.recurrent.begin(slots, offsets, parents, chain=chain, check=not capturing)

    def _group_output(self, launch) -> torch.Tensor:
        first = self.views[launch.outs[0]]
        total = sum(launch.attrs["widths"])
        return torch.as_strided(first, (self.B, self.T, total), first.stride(), first.storage_offset())

    @staticmethod
    def _adjacent(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor | None:
        """[gate | up] as one view when up directly follows gate in the same buffer."""
        if (gate.shape == up.shape and gate.stride() == up.stride() and gate.stride(-1) == 1
                and up.data_ptr() == gate.data_ptr() + gate.shape[-1] * gate.element_size()):
            return torch.as_strided(gate, (*gate.shape[:-1], 2 * gate.shape[-1]), gate.stride(),
                                    gate.storage_offset())
        return None

    # ------------------------------------------------------------------ run
    def run(self) -> torch.Tensor:
        if self.model.program.states:
            self._begin_recurrent()
        for refresh in self._per_run:
            refresh()
        for call in self.calls:
            call()
        return self.logits
