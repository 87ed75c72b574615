"""fusion: which neighbouring model-graph ops the GPU backend fuses into one launch, stated in the IR.

Preconditions: none. Postconditions: each selected model region (all by default, or `models`,
comma-separated) has the attribute `fuse = {add_norm, attention_prefetch, launch_overlap, linear_groups,
linear_rope_kv, norm_linear, rope_kv_write, swiglu_linear}` (booleans):
- add_norm: a residual `add` followed by the `rms_norm` of its sum runs as one launch;
- attention_prefetch (with launch_overlap; off): an attention launch whose output feeds an overlapped
  linear (the o projection) lets that linear start as soon as every attention program has started;
  where that linear runs as a GEMV (a one-row forward) its programs prefetch all of their weights
  into L2 while the latency-bound attention runs, then wait for it. Same values. Off: on an H100
  (session 32, bench/results/gpu-2026-12-07-session32) the 8B AR step took 5.761-5.765 ms with it
  against 5.783-5.788 without, 0.4 %: too small a gain to turn on unmeasured elsewhere (an H200's
  larger L2 may rank it differently: `gpu_bench.py --passes 'fusion{attention_prefetch=true}'`);
- launch_overlap: each Triton linear launch starts while the launch before it drains (programmatic
  dependent launch, sm_90+; backends/triton/kernels/launch_overlap.py): its programs prefetch their
  first weights into L2, then wait for the earlier launches before they read anything else. No
  launch goes; the gaps between them shrink. Other GPUs and the CPU backends ignore it;
- linear_groups: linears that read the same input with compatible weights (q/k/v, gate/up) run as
  one grouped GEMV/GEMM;
- rope_kv_write: the rope of q and k and the KV-cache write run as one launch before attention;
- linear_rope_kv: that rope + KV write runs in the epilogue of the q|k|v linear group (needs
  rope_kv_write): at one token each GEMV program computes one whole head and rotates it before
  it stores q or writes the cache, and the layer's rope_kv_write launch goes (other row counts,
  partial rotary and BF12 matrices with raw rows keep it, same bits; so does every compiled GPU
  forward where rope_kv_epilogue.VERIFIED_ON_GPU is false: kernels/rope_kv_epilogue.py);
- swiglu_linear: a `swiglu` whose only consumer is a linear (the MLP's down projection) runs as
  that linear's prologue: the kernel computes silu(gate) * up where it would read its input, so
  the [rows, intermediate] activation is neither written nor read and one launch goes (a forward
  whose linear runs cuBLAS, gemm_route.py, keeps the separate swiglu launch for it);
- norm_linear: an `rms_norm` read only by one linear group runs as that group's prologue (each
  program sums its row's squares, then normalises x where it would load it), and a residual `add`
  of a lone linear's result runs as that linear's epilogue; a decoder layer's two add + norm
  launches go in one-row forwards (forwards of more rows, Triton's GEMM or cuBLAS, keep the
  separate launches: backends/triton/fused_parts.py). Takes
  precedence over add_norm for the adds and norms it folds; in forwards that fold norms the region's
  other norms sum their squares in the prologue's fixed order (about 1.3 us more a launch on an H100).
Fused and unfused launches compute the same values (tests/triton_backend/test_fusion_policy.py
compares them bit for bit under the interpreter). Without this pass the Triton lowering writes
FUSION_DEFAULTS into build/pipeline.spec: every fusion on but attention_prefetch. The last four
(swiglu_linear, norm_linear, linear_rope_kv, launch_overlap) were opt-in until timed together on a
GPU: on an H100 (session 25, bench/results/gpu-2026-12-07-session25) they made the 8B target's AR step
8.1 % faster (5.949 against 6.470 ms, 204 launches against 333), with the same 65-row verify and, once
norm_linear folded into one-row forwards only (backends/triton/fused_parts.py), the same draft.
`fusion{norm_linear=false}` (...) turns one off. CPU backends ignore it.

Before:
    model @target attributes {dtype = "bf16", source = "t"} { ... }
After (fusion{add_norm=false}):
    model @target attributes {dtype = "bf16", fuse = {add_norm = false, attention_prefetch = false,
    launch_overlap = true, linear_groups = true, linear_rope_kv = true, norm_linear = true,
    rope_kv_write = true, swiglu_linear = true}, source = "t"} { ... }
"""
from __future__ import annotations

from specir.ir.nodes import Attrs, Pipeline
from specir.pass_infra import Option, Pass, models_option, selected_models

# each fusion's default, where a region states none (backends/triton/program.py reads it): all on but
# attention_prefetch, the last four of LATE_DEFAULTS since session 25 timed them on an H100 (module docstring)
FUSION_DEFAULTS = {"add_norm": True, "attention_prefetch": False, "launch_overlap": True, "linear_groups": True,
                   "linear_rope_kv": True, "norm_linear": True, "rope_kv_write": True, "swiglu_linear": True}
FUSIONS = tuple(FUSION_DEFAULTS)
# the fusions that were opt-in until session 25: the benchmarks' A/B builds and each fusion's tests turn these off
LATE_DEFAULTS = ("swiglu_linear", "norm_linear", "linear_rope_kv", "launch_overlap")
assert set(LATE_DEFAULTS) <= set(FUSION_DEFAULTS)


def fusion_attrs(**fuse: bool) -> Attrs:
    """The `fuse` model attribute: FUSION_DEFAULTS with the given fusions set."""
    unknown = set(fuse) - set(FUSION_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown fusions {sorted(unknown)}; known: {list(FUSIONS)}")
    return Attrs({**FUSION_DEFAULTS, **fuse})


class Fusion(Pass):
    name = "fusion"
    options = {
        "add_norm": Option(bool, FUSION_DEFAULTS["add_norm"], "fuse a residual add with the following rms_norm"),
        "attention_prefetch": Option(bool, FUSION_DEFAULTS["attention_prefetch"],
                                     "let the overlapped linear after an attention start at once and prefetch its "
                                     "weights while the attention runs (one-row forwards, sm_90+)"),
        "launch_overlap": Option(bool, FUSION_DEFAULTS["launch_overlap"],
                                 "start each linear launch while the launch before it drains (sm_90+)"),
        "linear_groups": Option(bool, FUSION_DEFAULTS["linear_groups"],
                                "run linears of one input (q/k/v, gate/up) as one launch"),
        "linear_rope_kv": Option(bool, FUSION_DEFAULTS["linear_rope_kv"],
                                 "run the rope + KV write in the q|k|v linear's epilogue at one token"),
        "norm_linear": Option(bool, FUSION_DEFAULTS["norm_linear"],
                              "fold rms_norm into the next linear's prologue, residual adds into the previous "
                              "linear's epilogue (one-row forwards)"),
        "rope_kv_write": Option(bool, FUSION_DEFAULTS["rope_kv_write"], "fuse the rope of q, k with the KV-cache write"),
        "swiglu_linear": Option(bool, FUSION_DEFAULTS["swiglu_linear"],
                                "compute a swiglu in the prologue of the linear that alone reads it"),
        "models": models_option(),
    }

    def run(self, pipeline: Pipeline) -> Pipeline:
        fuse = fusion_attrs(**{name: getattr(self, name) for name in FUSIONS})
        for model in selected_models(pipeline, self.models, self.name):
            pipeline = pipeline.with_model(model.with_attrs(fuse=fuse))
        return pipeline
