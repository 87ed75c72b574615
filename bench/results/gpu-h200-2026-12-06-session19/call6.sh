# session 19 call 6: call 5's mismatch: is it the packed verify, or the Triton GPU numerics of the tiny random
# hybrid (a near-tie)? The same prompts through the plain tree (no batch-fusion), the fused tree, AR on Triton and
# the reference AR, eager and captured
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 100 python3 - > $OUT/compare.txt 2>&1 <<'PY'
import sys, torch
sys.path.insert(0, ".")
from pathlib import Path
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.hybrid.checkpoints import make_hybrid_checkpoint
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.pipeline_template import pipeline_text
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
root = Path("/tmp/c6"); root.mkdir(exist_ok=True)
d = make_checkpoint("llama", root / "d", seed=11, vocab_size=259, num_hidden_layers=1)
t = make_hybrid_checkpoint("qwen3_5", root / "t", seed=40, vocab_size=259)
base = load_pipeline("<t>", text=pipeline_text("p", str(t), str(d), 3))
P = [[5, 6, 7, 5, 6, 7, 9, 5, 6], [1, 2, 3], [9, 9, 9, 4]]
for passes in ("tree-verify{budget=6,topk=2}", "tree-verify{budget=6,topk=2},batch-fusion{budget=8,shrink=false}"):
    q = PassManager(build_passes(passes)).run(base)
    print(passes, "triton", [r.tokens for r in make_engine(q, "triton", "cuda", None).generate(P, 6)], flush=True)
q = PassManager(build_passes("tree-verify{budget=6,topk=2}")).run(base)
print("ar triton", [r.tokens for r in make_engine(ar_pipeline(q, stock=False), "triton", "cuda", None).generate(P, 6)], flush=True)
print("ar reference", [r.tokens for r in make_engine(ar_pipeline(q, stock=False), "reference", "cpu", None).generate(P, 6)], flush=True)
PY
echo "rc=$?"; grep -v Writing $OUT/compare.txt | tail -6
