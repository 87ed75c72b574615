"""Packed (BF12) and plain (bf16) models through the Triton executor give the same logits bits.

    python bench/bf12_executor_bits.py [--layers 2]
    TRITON_INTERPRET=1 python bench/bf12_executor_bits.py --tiny      # code paths on the CPU

Random N(0, 0.02) bf16 weights at the Llama-3.1-8B matrix shapes (with `--layers` layers, so the
run is short; every matrix keeps its 8B shape, which is what picks split-K and grouping), the IR
model from the importer, and its twin with every linear rewritten to `packed_linear` (packed on
the device when the weights are prepared). Both run the same forwards with `TritonModelRunner`: a
prefill of `--prompt` tokens (skinny GEMM path), then one-token decodes (GEMV path). The plain
model states the gemm policy `cublas_min_rows = 0` in its IR (Triton everywhere, as the packed one
does; backends/triton/gemm_route.py), since the contract is bit-identity with the Triton kernels.
Prints one line per forward and exits 1 on any bit difference.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

import _checkout  # noqa: F401  (a plain checkout runs too)


def models(args, device):
    from gpu_bench import TINY_TARGET, hf_config, ir_model, random_weights, shape_dict
    from specir.passes.pack_weights import Verdict, rewrite_model
    shape = shape_dict(TINY_TARGET if args.tiny else "llama-3.1-8b")
    shape["num_hidden_layers"] = args.layers
    config = hf_config(shape)
    weights = random_weights(shape, device, seed=args.seed)
    plain = ir_model("target", config, weights).with_attrs(cublas_min_rows=0)
    linear = [op.attrs["weight"] for op in plain.graph.ops if op.name == "linear"]
    packed = rewrite_model(plain, {name: Verdict(True, "", weights[name].numel()) for name in linear})
    return plain, packed, weights, config


def forwards(model, weights, device, prompt: list[int], decodes: int) -> list[torch.Tensor]:
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.backends.triton.runner import TritonModelRunner
    runner = TritonModelRunner(CompiledModel(model, weights, device), slots=1, max_seq=len(prompt) + decodes + 1)
    ids = torch.tensor([prompt], device=device)
    out = [runner.forward([0], ids, torch.arange(len(prompt), device=device)[None])]
    runner.cache.lens[0] = len(prompt)
    for _ in range(decodes):
        nxt = out[-1][:, -1:].argmax(-1)
        pos = torch.tensor([[int(runner.cache.lens[0])]], device=device)
        out.append(runner.forward([0], nxt, pos))
        runner.cache.lens[0] += 1
    return [o.clone() for o in out]


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as integers of its width (so -0 != +0 and NaNs compare by payload)."""
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=16, help="prefill tokens")
    ap.add_argument("--decodes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (CPU, Triton interpreter)")
    args = ap.parse_args(argv)
    device = "cpu" if args.tiny else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA GPU (or --tiny under TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    return compare(args, device)


def compare(args, device) -> int:
    start = time.time()
    plain, packed, weights, config = models(args, device)
    prompt = torch.randint(0, config["vocab_size"], (args.prompt,), generator=torch.Generator().manual_seed(1)).tolist()
    a = forwards(plain, weights, device, prompt, args.decodes)
    b = forwards(packed, weights, device, prompt, args.decodes)
    same = True
    for i, (x, y) in enumerate(zip(a, b)):
        equal = x.dtype == y.dtype and torch.equal(bits(x), bits(y))
        same &= equal
        rows = x.shape[1]
        print(f"forward {i} ({rows} rows): bits equal {equal}, max |diff| {float((x.float() - y.float()).abs().max()):.3g}")
    where = torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)"
    print(f"{'8B' if not args.tiny else 'tiny'} matrix shapes, {args.layers} layers, {where}: packed and plain "
          f"logits {'bit-identical' if same else 'DIFFER'} ({time.time() - start:.0f} s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
