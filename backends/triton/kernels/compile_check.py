"""Compile every kernel of this package for a GPU architecture without a GPU.

    TRITON_INTERPRET=0 python -m specir.backends.triton.kernels.compile_check [--arch 90] [--json]

The CPU interpreter that the unit tests use does not run Triton's compiler, so a kernel can pass
every test and still fail to compile (or spill registers) on the device. This builds the real
cubin for each kernel at the Llama-3.1-8B shapes with Triton's bundled ptxas and reports
registers, spills (local memory), shared memory and half-precision fmas (`half_precision_fmas`) per kernel.
Exit status 1 if one fails.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time


def _cases():
    """(label, module, kernel, pointer dtypes, float args, constexprs, launch options)."""
    from .attention import attention_config

    bf, f32 = "bf16", "fp32"
    att = dict(q_ptr=bf, k_cache_ptr=bf, v_cache_ptr=bf, lens_ptr="i32", mask_ptr="u8", out_ptr=bf,
               o_part_ptr=f32, lse_part_ptr=f32, cnt_ptr="i32", slots_ptr="i32", offsets_ptr="i32", pos_ptr="i64",
               row_start_ptr="i32")
    att_const = dict(KH=8, G=4, D=128, BLOCK_D=128, HAS_SLOTS=True, HAS_OFFSETS=True, HAS_WINDOW=False,
                     GROUPED=False)
    merge_t1 = dict(MR=4, SB=16, S_P2=64)      # attention_config at T = 1 (rows 4), 64 splits
    tree = attention_config(1, 65, 32, 8, 128, 2048 + 65, sm=132)  # T = 65 (rows 260) as launched (ATTENTION_TILES)
    merge_tree = dict(MR=tree["merge_rows"], SB=tree["merge_splits"], S_P2=1 << (tree["num_splits"] - 1).bit_length())
    merge_packed = dict(MR=32, SB=2, S_P2=2)   # grouped, 64 requests of 8 packed rows (rows 32), 2 splits
    rope_ptrs = dict(q_ptr=bf, k_ptr=bf, v_ptr=bf, pos_ptr="i64", inv_freq_ptr=f32, q_out_ptr=bf, k_out_ptr=bf,
                     k_cache_ptr=bf, v_cache_ptr=bf, lens_ptr="i32", slots_ptr="i32", offsets_ptr="i32",
                     n_rows_ptr="i32")
    rope_const = dict(H=32, KH=8, D=128, HALF=64, BLOCK_H=8, BLOCK_KH=8, SPLIT=True, BLOCK_HALF=64, BLOCK_D=128,
                      BLOCK_TAIL=1, COPY_Q_TAIL=False, COPY_K_TAIL=False, HAS_SLOTS=True, HAS_OFFSETS=True,
                      HAS_N_ROWS=True)
    return [
        ("rms_norm", "norm", "_rms_norm_kernel", dict(x_ptr=bf, res_ptr=bf, w_ptr=bf, out_ptr=bf, res_out_ptr=bf),
         ["eps"], dict(HAS_RESIDUAL=False, BLOCK=4096, NCH=16, FIXED_ORDER=False), dict(num_warps=8)),
        ("add_rms_norm", "norm", "_rms_norm_kernel", dict(x_ptr=bf, res_ptr=bf, w_ptr=bf, out_ptr=bf, res_out_ptr=bf),
         ["eps"], dict(HAS_RESIDUAL=True, BLOCK=4096, NCH=16, FIXED_ORDER=False), dict(num_warps=8)),
        ("add_rms_norm (fixed order)", "norm", "_rms_norm_kernel",
         dict(x_ptr=bf, res_ptr=bf, w_ptr=bf, out_ptr=bf, res_out_ptr=bf),
         ["eps"], dict(HAS_RESIDUAL=True, BLOCK=4096, NCH=16, FIXED_ORDER=True), dict(num_warps=8)),
        ("rms_norm_1p (q/k norm, 128)", "hybrid_norm", "_hybrid_norm_kernel",
         dict(x_ptr=bf, gate_ptr=bf, w_ptr=bf, out_ptr=bf), ["eps"],
         dict(GROUP=128, BLOCK=128, ROWS=1, GATED=False, GATE_FIRST=False), dict(num_warps=1)),
        ("rms_norm_1p (hidden 4096)", "hybrid_norm", "_hybrid_norm_kernel",
         dict(x_ptr=bf, gate_ptr=bf, w_ptr=bf, out_ptr=bf), ["eps"],
         dict(GROUP=4096, BLOCK=4096, ROWS=1, GATED=False, GATE_FIRST=False), dict(num_warps=8)),
        ("rms_norm_gated (8192, gate first)", "hybrid_norm", "_hybrid_norm_kernel",
         dict(x_ptr=bf, gate_ptr=bf, w_ptr=bf, out_ptr=bf), ["eps"],
         dict(GROUP=8192, BLOCK=8192, ROWS=1, GATED=True, GATE_FIRST=True), dict(num_warps=16)),
        *[(f"pointwise {label}", "pointwise", "_pointwise_kernel", dict(a_ptr=bf, b_ptr=bf, v_ptr=bf, out_ptr=bf),
           ["factor", "divisor"], dict(OP=op, FN=fn, HAS_FACTOR=True, HAS_DIVISOR=True, HAS_VECTOR=True, BLOCK=1024),
           dict(num_warps=4)) for label, op, fn in (("sigmoid", 0, 1), ("gelu", 0, 4), ("mul", 1, 0), ("scale", 2, 0))],
        ("rope", "rope", "_rope_kernel", rope_ptrs, ["attention_scaling"], dict(rope_const, WRITE_CACHE=False),
         dict(num_warps=4)),
        ("rope_kv_write", "rope", "_rope_kernel", rope_ptrs, ["attention_scaling"], dict(rope_const, WRITE_CACHE=True),
         dict(num_warps=4)),
        ("rope_kv_write fp16", "rope", "_rope_kernel", {k: "fp16" if v == bf else v for k, v in rope_ptrs.items()},
         ["attention_scaling"], dict(rope_const, WRITE_CACHE=True), dict(num_warps=4)),  # round_product's f16 branch
        ("rope_kv_write a token a program", "rope", "_rope_kernel", rope_ptrs, ["attention_scaling"],
         dict(rope_const, BLOCK_H=32, SPLIT=False, WRITE_CACHE=True), dict(num_warps=4)),
        ("rope partial", "rope", "_rope_kernel", rope_ptrs, ["attention_scaling"],
         dict(rope_const, HALF=32, BLOCK_HALF=32, BLOCK_TAIL=64, COPY_Q_TAIL=True, COPY_K_TAIL=True, WRITE_CACHE=True),
         dict(num_warps=4)),
        ("silu_mul", "activation", "_silu_mul_kernel", dict(gate_ptr=bf, up_ptr=bf, out_ptr=bf), [],
         dict(BLOCK=1024), dict(num_warps=4)),
        ("embedding", "embedding", "_embedding_kernel", dict(ids_ptr="i64", table_ptr=bf, out_ptr=bf), [],
         dict(BLOCK=1024), dict(num_warps=4)),
        ("kv_write", "kv_cache", "_kv_write_kernel",
         dict(k_new_ptr=bf, v_new_ptr=bf, k_cache_ptr=bf, v_cache_ptr=bf, lens_ptr="i32", n_new_ptr="i32",
              slots_ptr="i32", offsets_ptr="i32", n_rows_ptr="i32"), [],
         dict(KH=8, D=128, BLOCK_KH=8, BLOCK_D=128, HAS_N_NEW=True, HAS_SLOTS=True, HAS_OFFSETS=True, HAS_N_ROWS=True),
         dict(num_warps=4)),
        ("kv_compact", "kv_cache", "_kv_compact_kernel",
         dict(k_cache_ptr=bf, v_cache_ptr=bf, lens_ptr="i32", acc_idx_ptr="i32", n_acc_ptr="i32", new_lens_ptr="i32",
              slots_ptr="i32"),
         [], dict(D=128, KH_D=1024, BLOCK=512, WRITE_LENS=True, HAS_SLOTS=True), dict(num_warps=4)),
        ("attention decode", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=16, BLOCK_N=64, SPLIT=True, HAS_TREE_MASK=False, **merge_t1),
         dict(num_warps=4, num_stages=2)),
        ("attention decode, overlapped, lets the next start", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=16, BLOCK_N=64, SPLIT=True, HAS_TREE_MASK=False, LET_NEXT_START=True, PDL=True,
              **merge_t1), dict(num_warps=4, num_stages=2, launch_pdl=True)),
        ("attention tree", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=tree["block_m"], BLOCK_N=tree["block_n"], SPLIT=True, HAS_TREE_MASK=True,
              **merge_tree), dict(num_warps=tree["num_warps"], num_stages=2)),
        ("attention tree, the rule", "attention", "_attention_kernel", att, ["qk_scale_log2"],  # bands with no tile
         dict(att_const, BLOCK_M=64, BLOCK_N=64, SPLIT=True, HAS_TREE_MASK=True, MR=64, SB=1, S_P2=4),
         dict(num_warps=8, num_stages=2)),
        ("attention window", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=16, BLOCK_N=64, SPLIT=True, HAS_TREE_MASK=False, HAS_WINDOW=True, **merge_t1),
         dict(num_warps=4, num_stages=2)),
        ("attention window tree", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=tree["block_m"], BLOCK_N=tree["block_n"], SPLIT=True, HAS_TREE_MASK=True,
              HAS_WINDOW=True, **merge_tree), dict(num_warps=tree["num_warps"], num_stages=2)),
        ("attention packed grouped", "attention", "_attention_kernel", att, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=32, BLOCK_N=64, SPLIT=True, HAS_TREE_MASK=True, GROUPED=True, **merge_packed),
         dict(num_warps=4, num_stages=2)),
        ("attention fp32", "attention", "_attention_kernel",
         {k: (f32 if v == bf else v) for k, v in att.items()}, ["qk_scale_log2"],
         dict(att_const, BLOCK_M=16, BLOCK_N=64, SPLIT=False, HAS_TREE_MASK=False, MR=4, SB=1, S_P2=1),
         dict(num_warps=4, num_stages=2)),
        ("greedy_accept_tree", "accept", "_greedy_accept_tree_kernel",
         dict(tokens_ptr="i64", parents_ptr="i32", target_ptr="i64", acc_idx_ptr="i32", n_acc_ptr="i32",
              bonus_ptr="i64", emitted_ptr="i64"), [], dict(BLOCK_T=128, LOG_T=7, HAS_EMITTED=True), dict(num_warps=4)),
        ("argmax chunks", "argmax", "_argmax_chunks_kernel", dict(logits_ptr=bf, max_ptr=f32, idx_ptr="i32"), [],
         dict(BLOCK=1024), dict(num_warps=4)),
        ("argmax reduce", "argmax", "_argmax_reduce_kernel", dict(max_ptr=f32, idx_ptr="i32", out_ptr="i64"), [],
         dict(BLOCK_C=256), dict(num_warps=1)),
        *_ranking_cases(bf, f32),
        *_recurrent_cases(bf, f32),
        *_linear_cases(bf, f32),
    ]


def _ranking_cases(bf, f32):
    """A drafter's ranking (ranking.py) over Llama 3's 128256 logits: top-8 of a tree level at batch 1
    (4096-column slices), top-64 at the widest slice, and a chain's log-probability (K = 0); draft.tree's
    expansion (tree_expand.py) at depth 9 (U = 64 fed rows) and a 64-wide level; its nodes
    (tree_nodes.py) for the 8B tree-fr build and at the kernel's limits."""
    chunk = dict(x_ptr=bf, m_ptr=f32, s_ptr=f32, val_ptr=f32, id_ptr="i32")
    tree = dict(vals_ptr=f32, toks_ptr="i64", score_ptr=f32, token_ptr="i64", parent_ptr="i64", depth_ptr="i64",
                fed_ptr="i64", row_mask_ptr="i1", frontier_ptr="i64", ids_ptr="i64", mask_ptr="i1", offsets_ptr="i32",
                pos_ptr="i64", lens_ptr="i32")
    nodes = dict(score_ptr=f32, rank_ptr="i32", token_ptr="i64", parent_ptr="i64", depth_ptr="i64", pending_ptr="i64",
                 node_of_ptr="i32", tokens_ptr="i64", parents_ptr="i32", depths_ptr="i64", valid_ptr="i1",
                 nscore_ptr=f32, anc_ptr="i1")
    merge = dict(m_ptr=f32, s_ptr=f32, val_ptr=f32, id_ptr="i32", out_val_ptr=f32, out_id_ptr="i64", x_ptr=bf,
                 tok_ptr="i64")
    return [
        ("ranking chunks top-8", "ranking", "_chunk_kernel", chunk, [], dict(CHUNK=4096, K=8, K_PAD=8),
         dict(num_warps=8)),
        ("ranking chunks top-64", "ranking", "_chunk_kernel", chunk, [], dict(CHUNK=8192, K=64, K_PAD=64),
         dict(num_warps=8)),
        ("ranking chunks log-prob", "ranking", "_chunk_kernel", chunk, [], dict(CHUNK=4096, K=0, K_PAD=1),
         dict(num_warps=8)),
        ("ranking merge top-8", "ranking", "_merge_kernel", merge, [], dict(C_PAD=32, K=8, K_PAD=8, CAND_PAD=256),
         dict(num_warps=4)),
        ("ranking merge top-64", "ranking", "_merge_kernel", merge, [], dict(C_PAD=16, K=64, K_PAD=64, CAND_PAD=1024),
         dict(num_warps=4)),
        ("ranking merge log-prob", "ranking", "_merge_kernel", merge, [], dict(C_PAD=32, K=0, K_PAD=1, CAND_PAD=32),
         dict(num_warps=4)),
        *[(f"tree_expand {label}", "tree_expand", "_tree_expand_kernel", tree, ["log_min"],
           dict(K=k, KP=k, UP=up, ROOT=root, FEED=feed), dict(num_warps=4 if k <= 16 else 8))
          for label, k, up, root, feed in (("root, top-8", 8, 64, True, True), ("level, top-8", 8, 64, False, True),
                                           ("last level, top-8", 8, 64, False, False),
                                           ("level, top-64", 64, 128, False, True))],
        ("tree_nodes ranks", "tree_nodes", "_tree_ranks_kernel", dict(score_ptr=f32, rank_ptr="i32"), [],
         dict(BI=64, BJ=64), dict(num_warps=4)),
        *[(f"tree_nodes {label}", "tree_nodes", "_tree_nodes_kernel", nodes, [],
           dict(CP=cp, WP=wp, DEPTH=depth), dict(num_warps=8))
          for label, cp, wp, depth in (("64 of 328 (topk 8, depth 6)", 512, 128, 6),
                                       ("64 of 584 (topk 8, depth 10)", 1024, 128, 10),
                                       ("255 of 4096", 4096, 256, 8))],
    ]


# the skinny GEMM as linear.py launches it at M = 5 (16-row tiles), with the SwiGLU prologue
GEMM_CONSTEXPRS = dict(BM=16, BN=64, G=1, SPLIT=4, HAS_BIAS=False, DOT_BF16=True, PRMT=True, SWAP=True, PRO=1)


def linear_pointers(bf: str = "bf16", f32: str = "fp32") -> dict:
    """The element types of the linear kernels' pointer arguments but x, up and w (which differ by kernel and
    format); a kernel ignores the names it does not take."""
    rope = dict(pos_ptr="i64", inv_freq_ptr=f32, k_cache_ptr=bf, v_cache_ptr=bf, lens_ptr="i32", slots_ptr="i32",
                offsets_ptr="i32", n_rows_ptr="i32")
    return dict(y_ptr=bf, bias_ptr=bf, mant_ptr="i64", code_ptr="i32", base_ptr="u8", esc_ptr="u8", rows_ptr="i32",
                ws_ptr=f32, cnt_ptr="i32", raw_ptr="i32", raw_rows_ptr="i32", res_ptr=bf, **rope)


def _linear_cases(bf, f32):
    """The linear kernels as linear.py launches them at M = 1 (GEMV, pair words, prefetch) and M = 5
    (skinny GEMM): with the SwiGLU prologue (the down projection, 4096 x 14336), and with the RMSNorm
    prologue and the residual epilogue (same shapes)."""
    ptrs = linear_pointers(bf, f32)
    gemv = dict(WORDS=True, X_PAIRS=True, BN=64, G=1, SPLIT=2, HAS_BIAS=False, PRMT=True, PREFETCH=True,
                DEPTH=1, RAW_PREFETCH=True, PRO=1)
    gemm = GEMM_CONSTEXPRS
    norm = dict(PRO=2, RESIDUAL=True, NORM_NCH=16)  # K = 4096: chunks(4096)
    cases = []
    for label, extra in (("swiglu_linear", {}), ("norm_linear + residual", norm)):
        cases += [
            (f"{label} gemv bf16", "linear_kernels", "gemv_kernel", dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr="i32"),
             ["eps", "rope_scaling"], dict(gemv, FORMAT=0, HAS_ROWS=False, X_LATE=False, FUSE_RAW=False, **extra),
             dict(num_warps=4, num_stages=2)),
            (f"{label} gemv bf12", "linear_kernels", "gemv_kernel", dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr=bf),
             ["eps", "rope_scaling"], dict(gemv, FORMAT=1, HAS_ROWS=True, X_LATE=True, FUSE_RAW=True, **extra),
             dict(num_warps=4, num_stages=2)),
            (f"{label} gemm bf16", "linear_kernels", "gemm_kernel", dict(ptrs, x_ptr=bf, up_ptr=bf, w_ptr=bf),
             ["eps", "rope_scaling"], dict(gemm, FORMAT=0, HAS_ROWS=False, **extra), dict(num_warps=4, num_stages=2)),
            (f"{label} gemm bf12", "linear_kernels", "gemm_kernel", dict(ptrs, x_ptr=bf, up_ptr=bf, w_ptr=bf),
             ["eps", "rope_scaling"], dict(gemm, FORMAT=1, HAS_ROWS=True, **extra), dict(num_warps=4, num_stages=2)),
        ]
    cases.append(("plain gemv bf16", "linear_kernels", "gemv_kernel", dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr="i32"),
                  ["eps", "rope_scaling"], dict(gemv, FORMAT=0, HAS_ROWS=False, X_LATE=False, FUSE_RAW=False, PRO=0),
                  dict(num_warps=4, num_stages=2)))
    # the rope + KV write in the q|k|v GEMV's epilogue (rope_kv_epilogue.py): one head of 128 per program
    rope_on = dict(norm, RESIDUAL=False, ROPE_KV=True, HAS_SLOTS=True, HAS_OFFSETS=True, HAS_N_ROWS=True, BN=128,
                   SPLIT=4)
    cases += [
        ("norm_linear + rope_kv gemv bf16", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr="i32"), ["eps", "rope_scaling"],
         dict(gemv, FORMAT=0, HAS_ROWS=False, X_LATE=False, FUSE_RAW=False, **rope_on),
         dict(num_warps=8, num_stages=2, maxnreg=128)),
        ("rope_kv gemv bf12", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr=bf), ["eps", "rope_scaling"],
         dict(gemv, FORMAT=1, HAS_ROWS=False, X_LATE=True, FUSE_RAW=False, **dict(rope_on, PRO=0, NORM_NCH=1)),
         dict(num_warps=8, num_stages=2, maxnreg=128)),
    ]
    # launch overlap (launch_overlap.py): the weights prefetched into L2 before the wait
    cases += [
        ("norm_linear + residual gemv bf16, overlap + L2 prefetch", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr="i32"), ["eps"],
         dict(gemv, FORMAT=0, HAS_ROWS=False, X_LATE=False, FUSE_RAW=False, PDL=True, PDL_ITERS=4, **norm),
         dict(num_warps=4, num_stages=2, launch_pdl=True)),
        ("swiglu_linear gemv bf12, overlap", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr=bf), ["eps"],
         dict(gemv, FORMAT=1, HAS_ROWS=True, X_LATE=True, FUSE_RAW=True, PDL=True),
         dict(num_warps=4, num_stages=2, launch_pdl=True)),
        ("plain gemm bf16, overlap", "linear_kernels", "gemm_kernel", dict(ptrs, x_ptr=bf, up_ptr=bf, w_ptr=bf),
         ["eps", "rope_scaling"], dict(gemm, FORMAT=0, HAS_ROWS=False, PRO=0, PDL=True), dict(num_warps=4, num_stages=2,
                                                                              launch_pdl=True)),
    ]
    # the GEMM's grid with a weight block's row tiles launched together (LinearConfig.m_fastest)
    cases.append(("plain gemm bf12, row tiles first", "linear_kernels", "gemm_kernel",
                  dict(ptrs, x_ptr=bf, up_ptr=bf, w_ptr=bf), ["eps", "rope_scaling"],
                  dict(gemm, FORMAT=1, HAS_ROWS=True, PRO=0, M_FASTEST=True), dict(num_warps=4, num_stages=2)))
    # the weights' cache policy (LinearConfig.weight_cache): L2-only and L1 evict-first loads
    cases += [
        (f"swiglu_linear gemv bf12, weights {policy}", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr=bf), ["eps", "rope_scaling"],
         dict(gemv, FORMAT=1, HAS_ROWS=True, X_LATE=True, FUSE_RAW=True, WCACHE=code), dict(num_warps=4, num_stages=2))
        for policy, code in (("cg", 1), ("evict_first", 2))]
    # a persistent grid (LinearConfig.persistent): the plain grid's work items in a loop
    cases += [
        (f"{label} gemv {fmt}, persistent", "linear_kernels", "gemv_kernel",
         dict(ptrs, x_ptr="i32", up_ptr="i32", w_ptr="i32" if fmt == "bf16" else bf), ["eps", "rope_scaling"],
         dict(gemv, FORMAT=int(fmt == "bf12"), HAS_ROWS=fmt == "bf12", X_LATE=fmt == "bf12", FUSE_RAW=fmt == "bf12",
              PERSISTENT=True, **extra), dict(num_warps=4, num_stages=2))
        for fmt in ("bf16", "bf12") for label, extra in (("swiglu_linear", {}), ("norm_linear + residual", norm))]
    return cases


def _recurrent_cases(bf, f32):
    """The recurrent ops at Qwen3.5-9B / Nemotron-H-8B shapes: the walk (chain, tree) and the tree's
    path replay (PATHS)."""
    ix = dict(slots_ptr="i64", base_ptr="i64", nodes_ptr="i64", parents_ptr="i64")
    paths = dict(path_ptr="i32", depth_ptr="i32", start_ptr="i64")
    conv = dict(x_ptr=bf, w_ptr=bf, bias_ptr=bf, out_ptr=bf, committed_ptr=bf, scratch_ptr=bf, **ix, **paths)
    factors = dict(fk=f32, fu=f32, fg=f32, fpath="i32", fdepth="i32", fmeta="i64")   # delta_factors.py
    delta = dict(qkv_ptr=bf, b_ptr=bf, a_ptr=bf, a_log_ptr=bf, dt_bias_ptr=bf, out_ptr=bf, committed_ptr=f32,
                 scratch_ptr=f32, **ix, **paths, **factors)
    ssm = dict(xbc_ptr=bf, dt_ptr=bf, a_log_ptr=bf, d_ptr=bf, dt_bias_ptr=bf, out_ptr=bf, committed_ptr=f32,
               scratch_ptr=f32, **ix, **paths)
    delta_const = dict(HK=16, HV=32, DK=128, DV=128, DKP=128, BLOCK_V=32)
    ssm_const = dict(H=128, P=64, G=8, N=128, NP=128, BLOCK_P=16)
    variants = {"chain": dict(CHAIN=True, PATHS=False), "tree": dict(CHAIN=False, PATHS=False),
                "tree (path replay)": dict(CHAIN=False, PATHS=True)}
    return [(f"conv1d tree{label}", "conv1d", "_conv1d_tree_kernel", conv, [],
             dict(K=4, KP=4, BLOCK_C=128, HAS_BIAS=True, SILU=True, PATHS=on), dict(num_warps=4))
            for label, on in (("", False), (" (path replay)", True))] + [
        ("conv1d tree (path replay, as launched: 1024 / 4)", "conv1d", "_conv1d_tree_kernel", conv, [],
         dict(K=4, KP=4, BLOCK_C=1024, HAS_BIAS=True, SILU=True, PATHS=True), dict(num_warps=4))] + [
        (f"{op} {label}", op, kernel, pointers, floats, dict(const, **flags), dict(num_warps=4))
        for op, kernel, pointers, floats, const in (
            ("gated_delta", "_gated_delta_kernel", delta, [], delta_const),
            ("mamba2_scan", "_mamba2_scan_kernel", ssm, ["dt_min", "dt_max"], ssm_const))
        for label, flags in variants.items()] + [
        ("gated_delta tree (path replay, as launched: 64 / 2)", "gated_delta", "_gated_delta_kernel", delta, [],
         dict(delta_const, BLOCK_V=64, CHAIN=False, PATHS=True), dict(num_warps=2)),
        ("gated_delta tree (path replay, factored)", "gated_delta", "_gated_delta_kernel", delta, [],
         dict(delta_const, BLOCK_V=64, CHAIN=False, PATHS=True, FACTORS=True), dict(num_warps=2)),
        ("gated_delta tree (walk, factored)", "gated_delta", "_gated_delta_kernel", delta, [],
         dict(delta_const, CHAIN=False, PATHS=False, FACTORS=True), dict(num_warps=4)),
        ("gated_delta tree (WY, 64 nodes, as launched)", "gated_delta_wy", "_gated_delta_wy_kernel",
         dict(delta, anc_ptr="i8"), [], dict(delta_const, BLOCK_V=32, TP=64, PEEL=False, PRECISION="tf32x3"),
         dict(num_warps=4)),
        ("gated_delta tree (WY, 65 nodes: root peeled, as launched)", "gated_delta_wy", "_gated_delta_wy_kernel",
         dict(delta, anc_ptr="i8"), [], dict(delta_const, BLOCK_V=32, TP=64, PEEL=True, PRECISION="tf32x3"),
         dict(num_warps=8)),
        ("gated_delta commit (factored)", "delta_factors", "_commit_kernel", dict(delta, nodes_ptr="i64"), [],
         dict(HV=32, DK=128, DV=128, DKP=128, BLOCK_V=64), dict(num_warps=4))]


def cubin_resources(cubin: bytes) -> dict:
    """Registers, local (spill) bytes and static shared memory from cuobjdump, if it is there:
    {"regs": REG, "local_bytes": LOCAL} ({} without the tool). bench/sass_count.py reads it too."""
    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    fields = dict(item.split(":", 1) for item in text.split() if ":" in item and item.split(":", 1)[1].isdigit())
    return {"regs": int(fields.get("REG", -1)), "local_bytes": int(fields.get("LOCAL", -1))}


def half_precision_fmas(ptx: str) -> int:
    """bf16/f16 fma instructions in `ptx`. The kernels compute in fp32 and round to the activation dtype
    where the reference rounds; a half-precision fma is the compiler contracting a rounded product with
    the sum after it (one rounding where the reference has two: the rope kernel's rotation did this)."""
    import re
    return len(re.findall(r"\bfma\.rn(?:\.ftz)?(?:\.sat)?\.(?:bf16|f16)(?:x2)?\b", ptx))


def compile_all(arch: int = 90, only: str = "", cases: list | None = None) -> list[dict]:
    """Compile every case (those whose label contains `only`, when given) for sm_`arch`: this module's cases,
    or `cases` in _cases()'s form (bench/gemm_registers.py passes the GEMM's tilings)."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", arch, 32)
    results = []
    for label, module, kernel, pointers, floats, constexprs, options in (_cases() if cases is None else cases):
        if only not in label:
            continue
        fn = getattr(importlib.import_module(f"{__package__}.{module}"), kernel)
        signature, attrs = {}, {}
        constexprs = dict(constexprs)
        for param in fn.params:      # a constexpr the case leaves out compiles at its default, as launched
            if param.is_constexpr and param.name not in constexprs and param.default is not inspect.Parameter.empty:
                constexprs[param.name] = param.default
        untyped = [n for n in fn.arg_names if n.endswith("_ptr") and n not in pointers]
        unset = [p.name for p in fn.params if p.is_constexpr and p.name not in constexprs]
        if untyped or unset:
            results.append({"kernel": label, "ok": False,
                            "error": f"compile_check lacks pointer types for {untyped} / constexprs {unset}"})
            continue
        for index, name in enumerate(fn.arg_names):
            if name in constexprs:
                signature[name] = "constexpr"
            elif name in pointers:
                signature[name] = "*" + pointers[name]
                attrs[(index,)] = [["tt.divisibility", 16]]
            elif name in floats:
                signature[name] = "fp32"
            else:
                signature[name] = "i32"
                if name.startswith("stride") and "_m" not in name:   # realistic: rows are 16-aligned
                    attrs[(index,)] = [["tt.divisibility", 16]]
        start = time.time()
        row = {"kernel": label}
        try:
            compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options)
            row.update(ok=True, shared_bytes=compiled.metadata.shared,
                       half_fma=half_precision_fmas(compiled.asm["ptx"]), **cubin_resources(compiled.asm["cubin"]))
        except Exception as exc:  # report every failure, not just the first
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
        row["seconds"] = round(time.time() - start, 1)
        results.append(row)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90 for H100/H200")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="", help="compile only the cases whose label contains this")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("0", ""):
        print("error: set TRITON_INTERPRET=0 (the interpreter does not compile)", file=sys.stderr)
        return 2
    results = compile_all(args.arch, args.only)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            if r["ok"]:
                print(f"{r['kernel']:20s} ok   regs {r.get('regs', '?'):>4} spill {r.get('local_bytes', '?'):>4} B "
                      f"smem {r['shared_bytes']:>6} B  {r['seconds']:.1f}s")
            else:
                print(f"{r['kernel']:20s} FAIL {r['error']}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
