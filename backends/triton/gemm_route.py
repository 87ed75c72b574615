"""Which library runs a plain (unpacked) `linear` group: the Triton GEMV / skinny GEMM, or cuBLAS.

Rule: a bf16-weight `linear` group in a bf16 model runs through cuBLAS
(`torch.nn.functional.linear`, capturable in CUDA graphs) when the forward has at least
CUBLAS_MIN_ROWS rows (M = B * T); below that, and for every other dtype combination that the
Triton kernel serves (bf16 weights with f32 activations), the Triton kernel runs. Chosen from
bench/results/gpu-h200-2026-11-30/gemv-v2.json (H200, Llama-3.1-8B matrices, microseconds):

    M            q/o 4096^2      k/v 1024x4096   gate/up 14336   down 4096x14336   lm_head 128256
                 Triton cuBLAS   Triton cuBLAS   Triton cuBLAS   Triton cuBLAS     Triton cuBLAS
    1 (GEMV)     12.1   12.7     6.4    7.7      34.5   32.0     34.9   33.5       250.9  249.2
    8            14.2   13.4     8.6    7.8      40.0   31.7     38.6   33.5       266.0  250.9
    16           15.2   13.5     8.9    7.9      41.9   32.4     40.3   33.5       268.8  254.5
    64           25.2   12.4     12.2   8.2      60.1   35.8     73.6   37.4       337.3  282.8
    128          45.5   14.1     22.8   8.5      85.0   35.1     124.2  39.2       482.4  277.9

cuBLAS is faster for every matrix from M = 8 (the smallest measured M above 1); at M = 1 the
Triton GEMV wins the 4096-wide matrices and stays (the AR step). M = 2..7 were not measured, so
they keep the Triton kernel (Triton's GEMM uses the same 16-row tiles from M = 2 to 16, so M = 8
is likely representative; measure before lowering the threshold). Chain verify at k = 4 (M = 5)
therefore still runs Triton; tree verify (65 rows), tree-level drafts (topk rows), prefill run
cuBLAS.

The policy is the IR's: a model region's attribute `cublas_min_rows = N` (0: never) decides; the
Triton lowering writes the default below into every model it lowers, so `build/pipeline.spec`
shows it, and the `gemm-policy` pass sets it explicitly. No environment variable changes it.

Default exception (BF12): a model region that has any `packed_linear` keeps every linear on Triton. Its
contract (DESIGN.md section 5, docs/BF12.md) is bit-identity with the same Triton kernels over the
unpacked weights, and cuBLAS sums in another order. A plain model's forwards below the threshold
(decode, chain verify, short prefills) are then bit-identical to its packed counterpart's
(tests/bf12_pipeline/test_triton_exactness.py); forwards of CUBLAS_MIN_ROWS rows or more are not.
`gemm-policy{cublas_min_rows=0}` on the plain pipeline compares the two bit for bit at any width.
"""
from __future__ import annotations

CUBLAS_MIN_ROWS = 8
CUBLAS_KERNEL = "cublas.linear"   # the name launch configs and manifests give the cuBLAS route
CUBLAS_CALL = "torch.nn.functional.linear"


def default_min_rows(model) -> int:
    """The policy the lowering writes when a model region states none: 0 (never) with packed weights."""
    if any(op.name == "packed_linear" for op in model.graph.ops):
        return 0
    return CUBLAS_MIN_ROWS


def cublas_min_rows(program) -> int | None:
    """Rows from which this program's plain bf16 linear groups run cuBLAS (None: never)."""
    stated = program.cublas_min_rows
    if stated is None:  # a region that states no policy (planned outside a lowering): the default
        stated = 0 if any(launch.kind == "packed_linear" for launch in program.launches) else CUBLAS_MIN_ROWS
    return stated if stated > 0 else None


def uses_cublas(program, launch, rows: int) -> bool:
    """True when `launch` (a `linear` group of `program`) runs cuBLAS in a forward of `rows` rows."""
    if launch.kind != "linear" or launch.attrs.get("dtype") != "bf16" or program.dtype != "bf16":
        return False
    threshold = cublas_min_rows(program)
    return threshold is not None and rows >= threshold


def reason(program) -> str:
    threshold = cublas_min_rows(program)
    if threshold is None:
        return ("Triton for every linear (the model has packed BF12 weights: bit-identity with the Triton kernel)"
                if any(launch.kind == "packed_linear" for launch in program.launches)
                else "Triton for every linear (cublas_min_rows = 0)")
    return f"bf16 linear groups with M >= {threshold} rows run cuBLAS ({CUBLAS_CALL}); smaller M runs Triton"
