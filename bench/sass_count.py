"""SASS instruction counts per weight of the linear kernels' inner loops, offline (no GPU).

    TRITON_INTERPRET=0 python bench/sass_count.py [--shape 4096x4096] [--m 1] [--fmt bf16,bf12]
                                                  [--config KEY=VAL ...] [--dump DIR] [--json]

Compiles `gemv_kernel` / `gemm_kernel` (backends/triton/kernels/linear_kernels.py) for sm_90a with
Triton's bundled ptxas, exactly as `linear.py` would launch them for (M, N, K) (the table in
`linear_config.choose`, or fields replaced with --config), disassembles the cubin with nvdisasm,
finds the loops (backward branches), takes the hottest one (the most instructions among the
innermost loops that contain memory loads: the main K loop), and reports its instructions per
weight by class: total, ALU (LOP3/SHF/PRMT/IADD3/SEL/ISETP...), IMAD, FMA pipe (FFMA/FADD/FMUL),
tensor (HGMMA/HMMA), loads, other. Weights per loop pass: for the GEMV the fma count of
the loop (one per weight; the prefetching loop is unrolled by two), for the GEMM block_n * 128 *
groups / threads, so "per weight" means per weight of the thread's share.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, replace

os.environ.setdefault("TRITON_INTERPRET", "0")

CLASSES = {
    "alu": ("LOP3", "LOP", "SHF", "SHL", "SHR", "PRMT", "IADD3", "IADD", "SEL", "ISETP", "IABS", "IMNMX",
            "VIMNMX", "LEA", "BMSK", "SGXT", "FLO", "POPC", "BREV", "PLOP3", "P2R", "R2P", "VABSDIFF4"),
    "imad": ("IMAD", "IMUL", "XMAD"),
    "fma": ("FFMA", "FADD", "FMUL", "FMNMX", "FSEL", "FSETP"),
    "tensor": ("HGMMA", "HMMA", "WARPGROUP"),
    "load": ("LDG", "LDS", "LDSM", "LDL", "LDC", "ULDC", "LDGSTS", "LDGDEPBAR", "UTMALDG"),
    "store": ("STS", "STG", "STL"),
    "move": ("MOV", "UMOV", "S2R", "S2UR", "CS2R", "SHFL", "F2FP", "I2F", "F2I", "UIADD3", "ULEA", "USHF",
             "ULOP3", "UISETP", "USEL", "UIMAD", "R2UR"),
    "sync": ("BAR", "DEPBAR", "WARPSYNC", "BSSY", "BSYNC", "NOP", "YIELD"),
    "branch": ("BRA", "EXIT", "RET", "CALL"),
}


def _classify(op: str) -> str:
    base = op.split(".")[0]
    for cls, ops in CLASSES.items():
        if base in ops:
            return cls
    return "other"


def compile_linear(m: int, n: int, k: int, fmt: str, cfg=None, arch: int = 90, swiglu: bool = False):
    """Compile the kernel `linear_bf16/linear_bf12` would launch (`swiglu`: with the SwiGLU
    prologue, `up=`); returns (compiled, cfg)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from specir.backends.triton.kernels import linear_kernels as lk
    from specir.backends.triton.kernels.linear_config import choose

    cfg = cfg or choose(m, n, k, fmt)
    groups_total = -(-k // 128)
    n_iters = -(-groups_total // cfg.groups)
    n_full = k // (128 * cfg.groups)
    per_split = -(-n_iters // cfg.split)
    values = dict(R=n, K=k, stride_w=k // 2 if cfg.kind == "gemv" else k, n_groups=groups_total,
                  n_iters=n_iters, n_full=n_full, iters_per_split=per_split, M=m, stride_xm=k, stride_um=k, stride_ym=n,
                  R_raw=max(1, n // 100), blocks_main=-(-n // cfg.block_n))
    bf12 = fmt == "bf12"
    words = k % 2 == 0 and cfg.kind == "gemv"
    ptrs = dict(x_ptr="i32" if cfg.kind == "gemv" else "bf16", up_ptr="i32" if cfg.kind == "gemv" else "bf16",
                y_ptr="bf16", bias_ptr="bf16",
                w_ptr=("bf16" if bf12 else ("i32" if words else "bf16")) if cfg.kind == "gemv" else "bf16",
                mant_ptr="i64" if bf12 else "bf16", code_ptr="i32" if bf12 else "bf16",
                base_ptr="u8" if bf12 else "bf16", esc_ptr="u8" if bf12 else "bf16",
                rows_ptr="i32", ws_ptr="fp32", cnt_ptr="i32", raw_ptr="i32", raw_rows_ptr="i32", res_ptr="bf16",
                pos_ptr="i64", inv_freq_ptr="fp32", k_cache_ptr="bf16", v_cache_ptr="bf16", lens_ptr="i32",
                slots_ptr="i32", offsets_ptr="i32", n_rows_ptr="i32")
    consts = dict(FORMAT=1 if bf12 else 0, BN=cfg.block_n, G=cfg.groups, SPLIT=cfg.split, HAS_BIAS=False,
                  HAS_ROWS=False, PRMT=cfg.prmt, PRO=lk.PRO_SWIGLU.value if swiglu else lk.PRO_NONE.value)
    if cfg.kind == "gemv":
        from specir.backends.triton.kernels.linear_config import WEIGHT_CACHE
        fn = lk.gemv_kernel
        # BF12 with raw rows fused into the launch (the usual case: ~1% of rows stay raw)
        consts.update(WORDS=words, X_PAIRS=True, PREFETCH=cfg.prefetch, X_LATE=cfg.x_late, DEPTH=cfg.depth,
                      FUSE_RAW=bf12 and cfg.fuse_raw, RAW_PREFETCH=cfg.prefetch,
                      WCACHE=WEIGHT_CACHE[cfg.weight_cache], PERSISTENT=bool(cfg.persistent))
    else:
        fn = lk.gemm_kernel
        consts.update(BM=cfg.block_m, DOT_BF16=True, SWAP=cfg.swap_ab)
    for param in fn.params:  # the other constexprs (fusions this count leaves off) at their defaults, as launched
        if param.is_constexpr and param.name not in consts:
            consts[param.name] = param.default
    floats = {"eps", "rope_scaling"}
    signature, attrs = {}, {}
    for index, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
        elif name in ptrs:
            signature[name] = "*" + ptrs[name]
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif name in floats:
            signature[name] = "fp32"
        else:  # an int the count does not depend on (rope's strides and heads, ...) is left unspecialised
            signature[name] = "i32"
            if values.get(name, 1) % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
    options = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    if cfg.maxnreg:
        options["maxnreg"] = cfg.maxnreg
    compiled = triton.compile(ASTSource(fn, signature, consts, attrs), target=GPUTarget("cuda", arch, 32),
                              options=options)
    return compiled, cfg


def sass_text(cubin: bytes) -> str:
    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-c", f.name], capture_output=True, text=True, check=True).stdout


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


_LABEL = re.compile(r"^(\.L\w+):")


def parse(sass: str):
    """([(address, opcode, operands)] in program order, {label: index of the next instruction})."""
    out, labels = [], {}
    for line in sass.splitlines():
        ml = _LABEL.match(line.strip())
        if ml:
            labels[ml.group(1)] = len(out)
            continue
        mt = _LINE.search(line)
        if mt:
            out.append((int(mt.group(1), 16), mt.group(3), mt.group(4)))
    return out, labels


def hot_loop(parsed):
    """Instructions of the main loop: among backward branches whose body holds a global load, the
    innermost (no other such loop inside), largest body."""
    instrs, labels = parsed
    loops = []
    for i, (addr, op, args) in enumerate(instrs):
        if op.startswith("BRA"):
            mt = re.search(r"\((\.L\w+)\)", args)
            if mt and labels.get(mt.group(1), i + 1) <= i:
                loops.append((labels[mt.group(1)], i))
    loops = [(s, e) for s, e in loops if any(op.startswith(("LDG", "HGMMA")) for _, op, _ in instrs[s:e + 1])]
    inner = [(s, e) for s, e in loops if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e) for s2, e2 in loops)]
    if not inner:
        return []
    s, e = max(inner, key=lambda se: se[1] - se[0])
    return instrs[s:e + 1]


def count(m, n, k, fmt, cfg=None, dump=None):
    compiled, cfg = compile_linear(m, n, k, fmt, cfg)
    sass = sass_text(compiled.asm["cubin"])
    if dump:
        os.makedirs(dump, exist_ok=True)
        tag = f"{fmt}_m{m}_{n}x{k}"
        with open(os.path.join(dump, tag + ".sass"), "w") as f:
            f.write(sass)
        with open(os.path.join(dump, tag + ".ptx"), "w") as f:
            f.write(compiled.asm["ptx"])
    loop = hot_loop(parse(sass))
    if dump:
        with open(os.path.join(dump, tag + ".loop.sass"), "w") as f:
            f.write("\n".join(f"{a:05x} {op} {args.strip()}" for a, op, args in loop) + "\n")
    threads = cfg.num_warps * 32
    weights = cfg.block_n * 128 * cfg.groups / threads
    ffma = sum(op.startswith("FFMA") for _, op, _ in loop)
    if cfg.kind == "gemv" and ffma:  # one fma per weight: also right for loops unrolled by the kernel
        weights = float(ffma)
    classes = Counter(_classify(op) for _, op, _ in loop)
    ops = Counter(op.split(".")[0] for _, op, _ in loop)
    from specir.backends.triton.kernels.compile_check import cubin_resources
    res = cubin_resources(compiled.asm["cubin"])
    regs, spills = res.get("regs"), res.get("local_bytes")
    return dict(fmt=fmt, M=m, N=n, K=k, config=asdict(cfg), loop_instructions=len(loop), weights_per_thread=weights,
                per_weight=round(len(loop) / weights, 3) if loop else None,
                by_class={c: round(v / weights, 3) for c, v in sorted(classes.items())},
                by_opcode={o: v for o, v in ops.most_common()}, regs=regs, spills=spills,
                shared=compiled.metadata.shared)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", help="NxK (default: 4096x4096)")
    ap.add_argument("--m", type=int, action="append", help="M (default 1)")
    ap.add_argument("--fmt", default="bf16,bf12")
    ap.add_argument("--config", nargs="*", default=[], help="LinearConfig fields to replace, e.g. block_n=32")
    ap.add_argument("--dump", help="write SASS and PTX here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from specir.backends.triton.kernels.linear_config import choose

    rows = []
    for shape in args.shape or ["4096x4096"]:
        n, k = map(int, shape.split("x"))
        for m in args.m or [1]:
            for fmt in args.fmt.split(","):
                cfg = choose(m, n, k, fmt)
                if args.config:
                    fields = {}
                    for item in args.config:
                        key, val = item.split("=")
                        fields[key] = (val.lower() == "true") if val.lower() in ("true", "false") else (
                            int(val) if val.lstrip("-").isdigit() else val)
                    cfg = replace(cfg, **fields)
                r = count(m, n, k, fmt, cfg, args.dump)
                rows.append(r)
                if not args.json:
                    c = r["config"]
                    print(f"{fmt:5s} M={m:<3d} {n}x{k} {c['kind']} bn={c['block_n']} bm={c['block_m']} g={c['groups']} "
                          f"w={c['num_warps']} s={c['num_stages']}: {r['per_weight']} instr/weight "
                          f"({r['loop_instructions']} in loop / {r['weights_per_thread']:g} weights per thread) "
                          + " ".join(f"{a}={b}" for a, b in r["by_class"].items())
                          + f" regs={r['regs']} spills={r['spills']} smem={r['shared']}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
