"""The decode step: one implementation of every step op's semantics, for every backend.

- `interfaces.py`: what a step op's definition declares (its width in tokens, the model forwards it
  runs, its effects on caches, whether it needs the host, its lowerings); the verifier, the cost
  model, cache sizing, kernel planning and the engine read these, never op names;
- `values.py`: the step's typed values as batched tensors (drafts, token trees, logits, accepted);
- `context.py`: the per-batch state every op reads and writes (caches, committed lengths, pending
  tokens, drafters' catch-up feeds, temperature, the counter-based random numbers);
- `ops/`: one file per op: its definition (registered into specir.ir.opdefs.OPS) and its torch
  semantics, capture-safe (no host read) unless the op declares it needs the host;
- `program.py`: the step lowered op by op, in IR order, into segments: device-only runs that a
  backend may capture (CUDA graphs), split around host ops;
- `engine.py`: the warm engine: sessions per batch shape, prefill, the decode loop, requests.
"""
