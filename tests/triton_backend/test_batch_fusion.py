"""batch-fusion on the Triton backend (the interpreter on a CPU): the packed verify (one forward of
one-token rows, per-row slot, lens, offset and mask row; attention grouped by request through
row_start) gives plain decoding's tokens, pad rows included; the packed verify runs inside the
device segment (packed on the device into a host-known number of rows); a pad row never writes KV."""
from __future__ import annotations

import torch

from specir.pass_infra import PassManager, build_passes
from specir.runtime.session import make_engine
from specir.step import ragged
from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


def test_packed_tree_verify_is_lossless_on_the_triton_backend(tiny_pair, device, monkeypatch):
    """Three requests of up to 5 nodes under a budget of 7 drafted tokens: 10 packed rows while all
    three are live, in a 16-row forward (6 pad rows: the bound 3 + 7 to ragged.capacity)."""
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion{shrink=false,budget=7}")).run(pipeline("tree", target, drafter))
    engine = make_engine(p, "triton", device, None)
    assert [seg["host"] for seg in engine.program.describe()] == [False]
    shapes, pack = [], ragged.pack

    def recording(nodes, live, rows=None):
        packed = pack(nodes, live, rows)
        shapes.append((packed.total(), packed.rows))
        return packed
    monkeypatch.setattr(ragged, "pack", recording)
    prompts = PROMPTS + [[9, 8, 7, 6, 5, 4, 3, 2]]
    results = engine.generate(prompts, 5)
    assert all(len(r.tokens) == 5 for r in results)
    report = forced(p, target, prompts, [r.tokens for r in results])
    assert report.checked == 15 and report.mismatches == 0, report.as_dict()
    assert max(max(r.accept_lengths) for r in results) > 1, "no drafted token was ever accepted"
    assert any(size > total for total, size in shapes), f"no step had pad rows: {shapes}"


def test_pad_rows_of_a_packed_forward_write_no_kv(tiny_pair, device):
    """A packed forward of 10 real rows in a 16-row bucket whose 6 pad rows carry other tokens and
    positions than row 0, on row 0's cache row: the KV cache and the real rows' logits equal those
    of the same forward with plain pad rows (copies of row 0), and the pad rows' logits are finite
    (their attention output is zero, not junk); the real rows' logits are those of the per-row
    attention (the same inputs without row_start)."""
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.runtime.weights import load_weights
    from specir.step.values import Nodes
    target, drafter = tiny_pair
    m = PassManager(build_passes("batch-fusion{shrink=false}")).run(pipeline("tree", target, drafter)).model("target")
    model = CompiledModel(m, load_weights(m, device), device)
    B, N = 3, 4
    parents = torch.tensor([[-1, 0, 0, 1]] * B, dtype=torch.int32)
    mask = torch.zeros(B, N, N, dtype=torch.bool)
    for n in range(N):
        mask[:, n, n] = True
        if n:
            mask[:, n] |= mask[:, int(parents[0, n])]
    nodes = Nodes(torch.randint(3, 250, (B, N)), parents, mask.sum(-1) - 1,
                  torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool), mask)
    nodes = Nodes(*(x.to(device) for x in (nodes.tokens, nodes.parents, nodes.depths, nodes.valid, nodes.mask)))
    packed = ragged.pack(nodes, torch.ones(B, dtype=torch.int32, device=device), rows=ragged.capacity(10))
    T, P = packed.total(), packed.rows
    assert (T, P) == (10, 16)
    lens = torch.tensor([5, 9, 2], dtype=torch.int32, device=device)
    base = model.new_cache(B, 32)
    for layer in base.k:  # a random committed prefix
        base.k[layer].normal_()
        base.v[layer].normal_()
    runs = []
    for junk, requests in ((False, B), (True, B), (False, None)):
        cache = model.new_cache(B, 32)
        for layer in base.k:
            cache.k[layer].copy_(base.k[layer])
            cache.v[layer].copy_(base.v[layer])
        inputs = ragged.allocate(P, N, device, requests=requests)
        ragged.forward_inputs(packed, nodes, lens, inputs)
        assert requests is None or inputs.row_start.tolist() == packed.offsets.tolist()
        if junk:
            inputs.ids[T:] = 7
            inputs.pos[T:] = 20
        logits = model.forward(cache, inputs).run().clone()
        runs.append((logits, cache))
    (plain, plain_cache), (junk, junk_cache), (per_row, _) = runs
    for layer in base.k:
        assert torch.equal(plain_cache.k[layer], junk_cache.k[layer])
        assert torch.equal(plain_cache.v[layer], junk_cache.v[layer])
    assert torch.equal(plain[:T], junk[:T]) and torch.isfinite(junk).all()
    torch.testing.assert_close(plain[:T], per_row[:T], rtol=1e-4, atol=1e-4)


def test_drafting_off_and_resync_on_the_triton_backend(tiny_pair, device):
    """draft.tree {off_at = 2} on the Triton backend: two live requests decode autoregressively (no
    drafter forward), the one left resyncs its drafter and speculates; every token forced."""
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion{shrink=false}")).run(pipeline("tree", target, drafter))
    from specir.ir.parser import parse
    from specir.ir.printer import print_pipeline
    p = parse(print_pipeline(p).replace("topk = 2}", "off_at = 2, topk = 2}"))
    engine = make_engine(p, "triton", device, None)
    decode = engine.open(2, engine.rows_needed(8, 6), sampling=False)
    short, long_ = decode.add(PROMPTS[1], 2), decode.add(PROMPTS[0], 6)
    while decode.active():
        decode.step()
    assert short.accept_lengths == [1, 1] and max(long_.accept_lengths[2:]) > 1
    report = forced(p, target, [short.prompt, long_.prompt], [short.generated, long_.generated])
    assert report.checked == 8 and report.mismatches == 0, report.as_dict()
