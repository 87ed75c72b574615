"""batch-fusion: the packed (ragged) verify and the batching mechanisms keep every token that plain
decoding gives, at batch sizes 1..8 with mixed prompt lengths, and the packed forward has no padding."""
from __future__ import annotations

import random

import pytest
import torch

from specir.declared_target import read as read_declared
from specir.load import load_pipeline
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from specir.runtime.token_forcing import Reference, force
from specir.step import ragged
from specir.step.ops.batch_budget import keep
from specir.step.values import Nodes
from tests.helpers.specs import write_spec

PIPELINES = {
    "chain": "batch-fusion{shrink=false}",
    "chain-budget": "batch-fusion{shrink=false,budget=6}",
    "tree": "tree-verify{budget=12,topk=2},batch-fusion{shrink=false}",
    "tree-budget-confidence": "tree-verify{budget=12,topk=2},batch-fusion{shrink=false,budget=10}",
    "tree-budget-equal": "tree-verify{budget=12,topk=2},batch-fusion{shrink=false,budget=10,split=equal,commit=compact}",
    "tree-shrink": "tree-verify{budget=12,topk=3},batch-fusion{shrink=true,max_batch=8}",
    "tree-table": "tree-verify{budget=12,topk=2},batch-fusion{shrink=false,budget=99}",  # tokens rewritten below
}
TABLE = "tokens = [12, 6, 0, 3]"  # by live batch size: 12 drafted tokens at 1, 6 at 2, none at 3, 3 from 4 on


def _prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(259) for _ in range(rng.randint(1, 17))] for _ in range(n)]


@pytest.fixture(scope="module")
def engines(pair, tmp_path_factory):
    target, drafter = pair
    folder = tmp_path_factory.mktemp("fusion")
    out = {}
    for name, passes in PIPELINES.items():
        path = write_spec(folder, name.replace("-", "_"), target, drafter, k=3, passes=passes)
        path.write_text(path.read_text().replace("tokens = [99]", TABLE))
        pipeline = load_pipeline(path)
        out[name] = make_engine(pipeline, "reference", "cpu", None)
    plain = load_pipeline(write_spec(folder, "plain", target, drafter, k=3))
    out["ar"] = make_engine(ar_pipeline(plain), "reference", "cpu", None)
    return out


@pytest.mark.parametrize("name", list(PIPELINES))
def test_fused_tokens_equal_plain_decoding_at_batch_1_to_8(engines, name):
    """Every batch size 1..8 (mixed prompt lengths, one to 17 tokens): each request's tokens are those
    of plain AR decoding of the target alone."""
    engine, ar = engines[name], engines["ar"]
    prompts = _prompts(8, seed=1)
    want = [r.tokens for r in ar.generate(prompts, 12)]
    for B in range(1, 9):
        got = [r.tokens for r in engine.generate(prompts[:B], 12)]
        assert got == want[:B], f"{name} at batch {B}"
    taus = [len(r.tokens) / max(1, len(r.accept_lengths)) for r in engine.generate(prompts[:1], 12)]
    if name != "tree-shrink":  # with a drafter as large as the target, the cost model turns drafting off
        assert max(taus) > 1.0, "speculation never accepted a drafted token"
    if name == "tree-table":  # three live requests: the table says no draft, so every step emits one token
        assert all(set(r.accept_lengths) == {1} for r in engine.generate(prompts[:3], 12))


def test_packed_forward_has_no_padding(engines):
    """The packed verify runs the valid nodes of the live requests: a finished request costs no row,
    the offsets are the cumulative per-request sizes, and the forward's rows are the host-known bound
    (two live requests' pending tokens + the budget of 10 drafted tokens: exactly, on a backend that
    neither compiles nor captures per shape; the Triton one rounds it to ragged.capacity, see
    tests/triton_backend/test_batch_fusion.py), the rows past the packed total pad rows."""
    engine = engines["tree-budget-confidence"]
    verify = next(op for op in engine.pipeline.step.ops if op.name == "verify.packed")
    decode = engine.open(3, engine.rows_needed(20, 12), sampling=False)
    a = decode.add([1, 2, 3], 1)
    b = decode.add(list(range(5, 20)), 12)
    c = decode.add([7], 12)
    decode.step()
    assert a.done
    decode.step()
    packed = decode.session.ctx.op_state[("ragged", id(verify))]
    sizes = packed.sizes()
    assert sizes[a.slot] == 0 and sizes[b.slot] >= 1 and sizes[c.slot] >= 1
    assert packed.total() == sum(sizes) <= 2 + 10  # two pending tokens + the budget of 10 drafted tokens
    assert not engine.backend.pads_packed_rows and packed.rows == 2 + 10
    assert packed.offsets.tolist() == [0] + list(torch.tensor(sizes).cumsum(0).tolist())


def test_budget_split_by_confidence_is_ancestor_closed():
    """batch.budget keeps the batch's best-scored nodes, never a node without its parent, and skips
    frozen requests; the equal split gives each live request the same share."""
    # two requests, a tree of 4 drafted nodes: 1 <- 0, 2 <- 1, 3 <- 0, 4 <- 3
    parents = torch.tensor([[-1, 0, 1, 0, 3]] * 2, dtype=torch.int32)
    score = torch.tensor([[0.0, -0.1, -0.2, -1.0, -1.1], [0.0, -2.0, -2.5, -3.0, -3.1]])
    valid = torch.ones(2, 5, dtype=torch.bool)
    live = torch.tensor([True, True])
    kept = keep(score[:, 1:], valid[:, 1:], live, torch.tensor(4), "confidence")
    assert kept.tolist() == [[True, True, True, True], [False, False, False, False]]
    kept = keep(score[:, 1:], valid[:, 1:], live, torch.tensor(5), "confidence")
    assert kept.tolist() == [[True, True, True, True], [True, False, False, False]]
    kept = keep(score[:, 1:], valid[:, 1:], torch.tensor([False, True]), torch.tensor(3), "confidence")
    assert kept.tolist() == [[False] * 4, [True, True, True, False]]
    kept = keep(score[:, 1:], valid[:, 1:], live, torch.tensor(5), "equal")
    assert kept.tolist() == [[True, True, True, False], [True, True, False, False]]
    for row, par in zip(kept.tolist(), parents.tolist()):
        full = [True] + row
        assert all(not full[n] or par[n] < 0 or full[par[n]] for n in range(5))


def test_pack_offsets_and_mask_rows():
    """ragged.pack: request-major, nodes ascending, cumulative offsets; a chain's mask row is causal."""
    nodes = Nodes.chain(torch.tensor([5, 6, 7]), None)
    nodes.valid = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    nodes.tokens = torch.tensor([[5, 1, 2], [6, 0, 0], [7, 3, 0]])
    nodes.depths = torch.arange(3)[None].expand(3, 3)
    packed = ragged.pack(nodes, torch.tensor([1, 1, 0]))
    assert packed.offsets.tolist() == [0, 3, 4, 4]
    assert packed.request.tolist() == [0, 0, 0, 1] and packed.node.tolist() == [0, 1, 2, 0]
    assert packed.rows == packed.total() == 4  # rows=None: exactly the packed total
    inputs = ragged.allocate(packed.rows, 3, "cpu")
    ragged.forward_inputs(packed, nodes, torch.tensor([10, 20, 30], dtype=torch.int32), inputs)
    assert inputs.ids[:, 0].tolist() == [5, 1, 2, 6]
    assert inputs.pos[:, 0].tolist() == [10, 11, 12, 20]
    assert inputs.mask[:, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True],
                                          [True, False, False]]
    assert inputs.row_start is None  # allocated only with `requests`
    grouped = ragged.allocate(8, 3, "cpu", requests=3)
    padded = ragged.pack(nodes, torch.tensor([1, 1, 0]), rows=8)  # a host-known bound: no host read
    assert padded.request.tolist() == [0, 0, 0, 1, 0, 0, 0, 0] and padded.node.tolist() == [0, 1, 2, 0, 0, 0, 0, 0]
    ragged.forward_inputs(padded, nodes, torch.tensor([10, 20, 30], dtype=torch.int32), grouped)
    assert grouped.row_start.tolist() == [0, 3, 4, 4] and grouped.ids[4:, 0].tolist() == [5] * 4  # 4 pad rows


def test_pad_rows_repeat_the_first_live_requests_first_node():
    """With a bound past the packed total, pad rows repeat row 0: the first live request's node 0 (a
    frozen or empty slot before it owns no row); capacity gives a bounded set of forward sizes."""
    nodes = Nodes.chain(torch.tensor([5, 6, 7]), None)
    nodes.valid = torch.tensor([[True] * 3, [True, True, False], [True, False, False]])
    packed = ragged.pack(nodes, torch.tensor([0, 1, 1]), rows=6)
    assert packed.offsets.tolist() == [0, 0, 2, 3] and packed.sizes() == [0, 2, 1]
    assert packed.request.tolist() == [1, 1, 2, 1, 1, 1] and packed.node.tolist() == [0, 1, 0, 0, 0, 0]
    assert [ragged.capacity(b) for b in (1, 8, 9, 33, 64, 65, 129, 320)] == [1, 8, 16, 64, 64, 128, 192, 320]


@pytest.mark.parametrize("most_rows", [None, 2])
def test_unpack_reuses_one_buffer_and_matches_a_fresh_one(most_rows):
    """ragged.unpack with the caller's buffers: one [B, N, V] buffer per shape, reused step after
    step; each result equals a freshly zeroed unpack (stale rows of the last step are cleared, pad
    rows written nowhere), also when a call passes more rows than the declared `most_rows` (its
    index of written rows grows to the largest call, never to B x N)."""
    gen = torch.Generator().manual_seed(0)
    buffers, seen = {}, set()
    for step, valid in enumerate([[[1, 1, 1], [1, 1, 0]], [[1, 0, 0], [1, 1, 1]], [[0, 0, 0], [1, 0, 0]],
                                  [[1, 1, 0], [0, 0, 0]]]):
        nodes = Nodes.chain(torch.tensor([5, 6]), None)
        nodes.valid = torch.tensor(valid, dtype=torch.bool)
        packed = ragged.pack(nodes, torch.tensor([1, 1]), rows=[None, 6][step % 2])  # pad rows every other step
        logits = torch.randn(packed.rows + 1, 1, 7, generator=gen) + 3  # no zero logits
        got = ragged.unpack(logits, packed, 2, 3, buffers, most_rows=most_rows)
        assert torch.equal(got, ragged.unpack(logits, packed, 2, 3)), step
        kept = nodes.valid.reshape(-1)
        assert torch.equal(got.reshape(6, 7)[~kept], torch.zeros(int((~kept).sum()), 7)), step
        assert torch.equal(got.reshape(6, 7)[kept], logits[:packed.total(), 0]), step
        seen.add(got.data_ptr())
    assert len(seen) == 1 and len(buffers) == 1
    assert next(iter(buffers.values())).written.numel() == (6 if most_rows else ragged.capacity(6))
    wide = ragged.unpack(torch.randn(packed.rows, 1, 7), packed, 2, 4, buffers)  # another shape: its own buffer
    assert wide.shape == (2, 4, 7) and len(buffers) == 2


def _wide_target_pair(tmp_path, **drafter):
    """A 512-wide target (the shrink table's subject) and a drafter of the given shape, one tokenizer."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    target = make_checkpoint("llama", tmp_path / "t", vocab_size=259, hidden_size=512, intermediate_size=1408,
                             num_attention_heads=8, num_key_value_heads=4)
    drafter = make_checkpoint("llama", tmp_path / "d", vocab_size=259, **drafter)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    return target, drafter


def _cpu_rates():
    """The CPU target's streaming and matmul rates without its fixed per-op cost: how a model large
    enough that its ops' dispatch is negligible is priced there (these test pairs are tiny)."""
    from dataclasses import replace
    from specir.targets import get_target
    return replace(get_target("cpu"), step_op_seconds=0.0)


def test_shrink_table_shrinks_and_turns_off(tmp_path):
    """The cost model's table for a target priced on the CPU's rates with a drafter a tenth its size:
    per-request drafted tokens never grow with the batch; at batch 1 the draft pays, and once the
    verify is compute-bound the step is plain autoregressive (no drafted token). With the CPU's
    per-op cost too (this pair's forwards are mostly that), the compiled table is that target's."""
    from specir.batch_schedule import budget_table
    from specir.targets import get_target
    target, drafter = _wide_target_pair(tmp_path, hidden_size=64, intermediate_size=112, num_hidden_layers=1)
    pipeline = load_pipeline(write_spec(tmp_path, "s", target, drafter, k=4,
                                        passes="tree-verify{budget=16,topk=2},batch-fusion{shrink=false}"))
    table = budget_table(pipeline, _cpu_rates(), 64, 0.8)
    per_request = [table[min(b, len(table)) - 1] / b for b in range(1, 65)]
    assert all(a >= b for a, b in zip(per_request, per_request[1:])), table
    assert table[0] > 0 and table[-1] == 0, table
    fused = load_pipeline(write_spec(tmp_path, "f", target, drafter, k=4, passes=(
        "tree-verify{budget=16,topk=2},batch-fusion{shrink=true,target=cpu,alpha=0.8}")))
    printed = list(next(op for op in fused.step.ops if op.name == "batch.budget").attrs["tokens"])
    assert printed == budget_table(pipeline, get_target("cpu"), 64, 0.8)
    off_at = next(op for op in fused.step.ops if op.name == "draft.tree").attrs["off_at"]
    assert all(t == 0 for t in printed[off_at - 1:]) and (off_at == 1 or printed[off_at - 2] > 0), (off_at, printed)


def test_the_cpu_per_op_cost_turns_a_tiny_drafter_off(tmp_path):
    """On the CPU a small model's forward is mostly its ops' fixed cost (targets.json's fitted
    step_op_seconds): a drafter of the target's depth costs what the target does per forward, so
    no chain of it pays at any batch size and the table drafts nothing (off from 1 live request);
    priced on the rates alone, the same chain pays at batch 1."""
    from specir.batch_schedule import budget_table, never_drafts
    from specir.targets import get_target
    target, drafter = _wide_target_pair(tmp_path, hidden_size=64, intermediate_size=112, num_hidden_layers=1)
    pipeline = load_pipeline(write_spec(tmp_path, "s", target, drafter, k=4, passes="batch-fusion{shrink=false}"))
    assert budget_table(pipeline, get_target("cpu"), 64, 0.7) == [0]
    assert budget_table(pipeline, _cpu_rates(), 64, 0.7)[0] > 0
    fused = load_pipeline(write_spec(tmp_path, "f", target, drafter, k=4, passes="batch-fusion{target=cpu}"))
    assert never_drafts(fused) and not never_drafts(pipeline)


def test_default_shrink_table_is_priced_for_the_compile_target(tmp_path):
    """batch-fusion's default (shrink on, target "") prints the table the cost model prices for the
    target being compiled for, h200 under `specir opt`; an explicit target wins over the compile
    target; the table shows in the printed IR, so the build never depends on the context unseen."""
    from specir.batch_schedule import budget_table
    from specir.compiler import compile_pipeline
    from specir.pass_infra import PassManager, build_passes
    from specir.targets import get_target
    target, drafter = _wide_target_pair(tmp_path, hidden_size=64, intermediate_size=112, num_hidden_layers=1)
    spec = write_spec(tmp_path, "s", target, drafter, k=4, passes="tree-verify{budget=16,topk=2}")
    tree = load_pipeline(spec)
    tokens = lambda p: list(next(op for op in p.step.ops if op.name == "batch.budget").attrs["tokens"])  # noqa: E731
    whole = PassManager(build_passes("batch-fusion{shrink=false}")).run(tree)
    want = {t: budget_table(whole, get_target(t), 64, 0.7) for t in ("cpu", "h200")}
    assert want["cpu"] != want["h200"], want  # the test tells the two apart
    assert tokens(PassManager(build_passes("batch-fusion")).run(tree)) == want["h200"]
    assert tokens(PassManager(build_passes("batch-fusion"), target="cpu").run(tree)) == want["cpu"]
    assert tokens(PassManager(build_passes("batch-fusion{target=h200}"), target="cpu").run(tree)) == want["h200"]
    compile_pipeline(spec, "cpu", tmp_path / "build", "batch-fusion")
    built = load_pipeline(tmp_path / "build" / "pipeline.spec")
    assert tokens(built) == want["cpu"]


def test_continuous_batching_forced_against_transformers(engines, pair):
    """Batch 4 through DecodeSession with Poisson-like arrivals: requests of different prompt lengths
    end, start and accept different lengths in the same steps; every token of every request is
    token-forced against transformers on the declared target."""
    engine = engines["tree-budget-confidence"]
    reference = Reference(read_declared(engine.pipeline), "cpu")
    rng = random.Random(7)
    queue = [(p, rng.choice([3, 8, 14])) for p in _prompts(10, seed=3)]
    decode = engine.open(4, engine.rows_needed(17, 14), sampling=False)
    sizes_seen, mixed_steps = set(), 0
    while queue or decode.active():
        while queue and decode.free_slots() and (rng.random() < 0.6 or not decode.active()):
            decode.add(*queue.pop(0))
        sizes_seen.add(decode.active())
        events = decode.step()
        mixed_steps += len({len(kept) for _, kept in events}) > 1  # requests kept different lengths
    done = decode.requests
    assert len(done) == 10 and all(r.done for r in done)
    assert len(sizes_seen) >= 3, "the batch composition never changed"
    assert mixed_steps > 0, "no step mixed accept lengths"
    report = force(reference, [r.prompt for r in done], [r.generated for r in done])
    assert report.ok and report.checked == sum(r.max_new for r in done), report.as_dict()


def test_off_at_drafts_nothing_then_resyncs(engines, pair, tmp_path):
    """draft.tree {off_at = 2}: with two or more live requests no drafter forward runs and every step
    emits one token (a request joining then is not prefilled on the drafter); once one request is
    left, the drafter catches up on the tokens it skipped (the late one's whole history) and
    speculation resumes; every request's tokens equal AR."""
    target, drafter = pair
    path = write_spec(tmp_path, "off", target, drafter, k=3, passes="tree-verify{budget=12,topk=2},batch-fusion{shrink=false}")
    path.write_text(path.read_text().replace("topk = 2}", "off_at = 2, topk = 2}"))
    engine = make_engine(load_pipeline(path), "reference", "cpu", None)
    prompts = _prompts(3, seed=5)
    want = [r.tokens for r in engines["ar"].generate(prompts, 16)]
    decode = engine.open(3, engine.rows_needed(17, 16), sampling=False)
    short = decode.add(prompts[0], 4)
    late = decode.add(prompts[1], 16)
    state = next(s for s in decode.session.ctx.models.values() if s.role == "draft")
    lens = state.lens.clone()
    # `late` joined at two live requests, where drafting is off: its drafter rows were not prefilled
    assert lens[short.slot] == len(prompts[0]) - 1 and lens[late.slot] == 0
    while not short.done:
        decode.step()
    assert torch.equal(state.lens, lens), "the drafter ran while drafting was off"
    assert short.accept_lengths == [1, 1, 1, 1]
    while decode.active():
        decode.step()
    assert max(late.accept_lengths[4:]) > 1, "speculation did not resume"
    assert [short.generated, late.generated] == [want[0][:4], want[1]]
    again = decode.add(prompts[2], 16)  # a new request alone: on from its first step
    while decode.active():
        decode.step()
    assert again.generated == want[2] and max(again.accept_lengths) > 1


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_fused_steps_replayed_from_captures_equal_eager(pair, tmp_path, temperature):
    """With emulated CUDA graphs (tests/step/test_capture_replay.py): the packed verify runs inside
    the captured step (no host read), one capture per forward size (its variant, from the live count)
    and per drafting's on / off / resync variant (resync never replays); requests finishing at
    different times cross the off threshold both ways, and every token equals the eager run's."""
    from specir.backends.reference.step_backend import TableStepBackend
    from specir.step.engine import StepEngine
    from tests.step.test_capture_replay import EmulatedGraphs
    target, drafter = pair
    path = write_spec(tmp_path, "cap", target, drafter, k=3,
                      passes="tree-verify{budget=8,topk=2},batch-fusion{shrink=false,budget=10}")
    path.write_text(path.read_text().replace("topk = 2}", "off_at = 3, topk = 2}"))
    pipeline = load_pipeline(path)
    prompts = _prompts(3, seed=9)
    items = [(prompts[0], 3), (prompts[1], 14), (prompts[2], 6)]

    def run(engine):
        decode = engine.open(3, engine.rows_needed(17, 14), sampling=True)
        reqs = [decode.add(p, n, temperature, 5 + i) for i, (p, n) in enumerate(items)]
        while decode.active():
            decode.step()
        again = decode.add(prompts[0], 8, temperature, 11)  # joins while one request still runs, or alone
        while decode.active():
            decode.step()
        return [(r.generated, r.accept_lengths) for r in reqs + [again]]

    graphs = EmulatedGraphs(TableStepBackend("cpu"))
    want = run(StepEngine(pipeline, TableStepBackend("cpu")))
    captured = StepEngine(pipeline, graphs)
    assert run(captured) == want
    first = graphs.captured
    assert run(captured) == want
    assert graphs.captured == first, "the same batch run again captured again"
    assert graphs.captured >= 2 and graphs.replays > graphs.captured
    sessions = list(captured.sessions.values())
    assert not [k for s in sessions for m in s.ctx.models.values() for k in m.graphs if k[0] == "packed"], \
        "the packed forward is part of the captured step, not a graph of its own"
    verify = next(op for op in pipeline.step.ops if op.name == "verify.packed")
    table = sessions[0].ctx.op_state[("rows", id(verify))]
    assert table[1:] == [ragged.capacity(min(9 * b, b + 10)) for b in (1, 2, 3)], table  # N = 9, budget 10
    sizes = {variant for s in sessions for key in s.captures for variant in key[2] if isinstance(variant, int)}
    assert sizes and sizes <= set(table), (sizes, table)
    assert want[0][1][0] == 1, "three live requests: drafting should be off"


def test_shrink_table_for_an_ngram_draft(tmp_path):
    """An n-gram draft (draft.ngram: no drafter, no model forward) under batch-fusion{shrink=true}:
    the table prices the verify alone, so at every batch size it drafts at least as many tokens per
    request as a chain drafter would (whose forwards it must also pay), still turns off once the verify
    is compute-bound, and the draft op carries `off_at` from that batch size."""
    from specir.batch_schedule import budget_table
    from specir.targets import get_target
    target, drafter = _wide_target_pair(tmp_path, hidden_size=256, intermediate_size=704, num_hidden_layers=2)
    cpu = _cpu_rates()
    ngram = budget_table(load_pipeline(write_spec(tmp_path, "n", target, "ngram", k=4, passes="batch-fusion{shrink=false}")),
                         cpu, 64, 0.7)
    chain = budget_table(load_pipeline(write_spec(tmp_path, "c", target, drafter, k=4, passes="batch-fusion{shrink=false}")),
                         cpu, 64, 0.7)
    at = lambda table, b: table[min(b, len(table)) - 1]  # noqa: E731
    assert all(at(ngram, b) >= at(chain, b) for b in range(1, 65)), (ngram, chain)
    assert at(ngram, 1) > 0 and ngram[-1] == 0, ngram
    fused = load_pipeline(write_spec(tmp_path, "f", target, "ngram", k=4,
                                     passes="batch-fusion{shrink=true,target=cpu}"))
    printed = list(next(op for op in fused.step.ops if op.name == "batch.budget").attrs["tokens"])
    plain = load_pipeline(write_spec(tmp_path, "n", target, "ngram", k=4, passes="batch-fusion{shrink=false}"))
    assert printed == budget_table(plain, get_target("cpu"), 64, 0.7) and printed[0] > 0, printed
    off_at = next(op for op in fused.step.ops if op.name == "draft.ngram").attrs["off_at"]
    assert printed[off_at - 2] > 0 and all(t == 0 for t in printed[off_at - 1:]), (off_at, printed)


def test_ngram_off_at_runs_no_lookup_and_keeps_tokens(engines, pair, tmp_path, monkeypatch):
    """draft.ngram {off_at = 2} behind a packed verify: with two or more live requests no lookup runs
    and every step emits one token; alone, the request drafts again; every token equals AR."""
    from specir.step.ops import draft_ngram
    target, _ = pair
    path = write_spec(tmp_path, "ngoff", target, "ngram", k=3, passes="batch-fusion{shrink=false}")
    path.write_text(path.read_text().replace("{k = 3}", "{k = 3, off_at = 2}"))
    assert "off_at = 2" in path.read_text()
    engine = make_engine(load_pipeline(path), "reference", "cpu", None)
    motif = [5, 17, 33, 2, 9]
    prompts = [motif * 3, (motif[::-1] * 3)[:13]]  # repetitive: the lookup proposes when it runs
    want = [r.tokens for r in engines["ar"].generate(prompts, 12)]
    calls = []
    real = draft_ngram.lookup
    monkeypatch.setattr(draft_ngram, "lookup", lambda *a: calls.append(1) or real(*a))
    decode = engine.open(2, engine.rows_needed(16, 12), sampling=False)
    short = decode.add(prompts[0], 4)
    late = decode.add(prompts[1], 12)
    while not short.done:
        decode.step()
    assert not calls, "the n-gram lookup ran while drafting was off"
    assert short.accept_lengths == [1, 1, 1, 1]
    while decode.active():
        decode.step()
    assert calls, "drafting did not resume with one live request"
    assert [short.generated, late.generated] == [want[0][:4], want[1]]


def test_serving_warm_up_captures_every_live_count(pair, tmp_path):
    """specir serve's lane warm-up on a capturing backend (emulated CUDA graphs): afterwards every
    live count 1 .. capacity has its step captured and every prefill shape its forward, so a batch
    that then joins and drains one by one captures nothing new, and its tokens equal an eager run's."""
    from specir.backends.reference.step_backend import TableStepBackend
    from specir.serve.scheduler import Lane
    from specir.step.engine import StepEngine
    from tests.step.test_capture_replay import EmulatedGraphs
    target, drafter = pair
    # each request's whole 9-node tree: 16 rows with one live request, 32 with two or three
    pipeline = load_pipeline(write_spec(tmp_path, "warm", target, drafter, k=3,
                                        passes="tree-verify{budget=8,topk=2},batch-fusion{shrink=false}"))
    graphs = EmulatedGraphs(TableStepBackend("cpu"))
    engine = StepEngine(pipeline, graphs)
    rows = engine.rows_needed(24, 120)  # room for the ramp's requests to stay live through its 6 steps
    lane = Lane(engine, 3, rows, sampling=False)
    lane.open()
    lane.warm()
    verify = next(op for op in pipeline.step.ops if op.name == "verify.packed")
    assert lane.decode.session.ctx.op_state[("rows", id(verify))][1:] == [16, 32, 32]
    from specir.step import prefill_shapes
    shapes = prefill_shapes.shapes(3, lane.decode.session.max_seq)
    assert lane.prefill_shapes == 2 * len(shapes)  # every prefill shape of the target and the drafter
    assert lane.decode.active() == 0 and graphs.captured == 2 + lane.prefill_shapes  # one per step size
    captured = graphs.captured
    prompts = _prompts(3, seed=4)
    reqs = [lane.decode.add(p, n, 0.0, 1) for p, n in zip(prompts, (4, 9, 14))]
    while lane.decode.active():
        lane.decode.step()
    assert graphs.captured == captured, "a live count or prefill shape the warm-up met was captured again"
    eager = StepEngine(pipeline, TableStepBackend("cpu")).open(3, rows, sampling=False)
    want = [eager.add(p, n, 0.0, 1) for p, n in zip(prompts, (4, 9, 14))]
    while eager.active():
        eager.step()
    assert [r.generated for r in reqs] == [r.generated for r in want]


def test_a_stopped_chain_verifies_one_row_per_request(engines, pair, tmp_path, monkeypatch):
    """draft.chain {off_at = 1}: drafting is off at every live count, so the draft has width 0 and
    the packed verify's logits and acceptance work on the pending token alone ([B, 1, V], as an AR
    step's), not on k empty positions; every token equals AR."""
    target, drafter = pair
    path = write_spec(tmp_path, "chainoff", target, drafter, k=3, passes="batch-fusion{shrink=false}")
    path.write_text(path.read_text().replace("{k = 3}", "{k = 3, off_at = 1}"))
    assert "off_at = 1" in path.read_text()
    engine = make_engine(load_pipeline(path), "reference", "cpu", None)
    widths, unpack = [], ragged.unpack

    def recording(logits, packed, B, N, *args, **kwargs):
        widths.append(N)
        return unpack(logits, packed, B, N, *args, **kwargs)
    monkeypatch.setattr(ragged, "unpack", recording)
    prompts = _prompts(2, seed=12)
    results = engine.generate(prompts, 6)
    assert widths and set(widths) == {1}, widths
    assert [r.tokens for r in results] == [r.tokens for r in engines["ar"].generate(prompts, 6)]
