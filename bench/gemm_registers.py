"""Registers and shared memory of the skinny GEMM per tiling, from sm_90 builds on the CPU (no GPU needed).

    TRITON_INTERPRET=0 python bench/gemm_registers.py [--out OUT.json]

For block_m x block_n x num_warps (bench/gemm_tune.py's stage 1), BF12 and bf16, the plain GEMM (no prologue or
epilogue) compiled for sm_90 with Triton's bundled ptxas (compile_check.compile_all): registers a thread,
spill bytes and shared memory a program. An SM has 65536 registers (given out 8 a thread, 256 a warp at a time)
and 228 KB of shared memory, so these bound the programs an SM holds at once, which a memory-bound GEMM needs many of. Prints a table; writes JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _checkout  # noqa: F401  (a plain checkout runs too)

SM_REGISTERS, SM_SHARED = 65536, 228 * 1024


def cases():
    """compile_check's plain GEMM (its pointer types and constexprs) at each tiling, in compile_all's case form."""
    from specir.backends.triton.kernels.compile_check import GEMM_CONSTEXPRS, linear_pointers

    ptrs = dict(linear_pointers(), x_ptr="bf16", up_ptr="bf16", w_ptr="bf16")
    out = []
    for fmt, name in ((1, "bf12"), (0, "bf16")):
        for bm in (16, 32, 64, 128):
            for bn in (64, 128, 256):
                for warps in (4, 8):
                    out.append((f"{name} {bm} {bn} {warps}", "linear_kernels", "gemm_kernel", ptrs, ["eps"],
                                dict(GEMM_CONSTEXPRS, BM=bm, BN=bn, PRO=0, FORMAT=fmt, HAS_ROWS=fmt == 1),
                                dict(num_warps=warps, num_stages=2)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from specir.backends.triton.kernels.compile_check import compile_all

    rows = []
    for r in compile_all(90, cases=cases()):
        fmt, bm, bn, warps = r["kernel"].split()
        row = dict(format=fmt, block_m=int(bm), block_n=int(bn), num_warps=int(warps), ok=r["ok"],
                   regs=r.get("regs"), spill_bytes=r.get("local_bytes"), shared_bytes=r.get("shared_bytes"))
        if r["ok"] and r.get("regs", -1) > 0:
            per_warp = -(-(-(-r["regs"] // 8) * 8) * 32 // 256) * 256   # registers: 8 a thread, 256 a warp at a time
            by_regs = SM_REGISTERS // (per_warp * int(warps))
            by_smem = SM_SHARED // max(r["shared_bytes"], 1)
            row["programs_per_sm"] = min(by_regs, by_smem)
        rows.append(row)
    print("| format | block_m | block_n | warps | registers | spill B | shared KB | programs / SM |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['format']} | {r['block_m']} | {r['block_n']} | {r['num_warps']} | {r['regs']} | {r['spill_bytes']} | "
              f"{(r['shared_bytes'] or 0) / 1024:.0f} | {r.get('programs_per_sm', '')} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
