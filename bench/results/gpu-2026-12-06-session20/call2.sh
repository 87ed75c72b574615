# session 20 call 2: two-level-verify on hybrid targets compiled on the GPU (the tests CI runs under the interpreter:
# a recurrent mid level over chain and tree drafts, a mid equal to the target accepting its whole extension), then the
# Qwen3.5-9B-like hybrid's tree with a mid level of its first 16 layers (tree-2l) against the plain tree, b1, through
# `specir bench --check` (random weights: the step's cost and 0 mismatches at production shape, not its acceptance)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_hybrid_passes.py tests/passes/test_two_level_verify.py \
  -k "triton or whole_proposal" > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 8 $OUT/gpu-tests.txt | cut -c1-300
timeout -s INT 320 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench --builds tree-2l,tree \
  --batch-sizes 1 --check-batch-sizes 1 --limit 4 --max-new-tokens 32 --bench-timeout 150 --budget-s 310 \
  > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log /tmp/hb/compile.log $OUT/ 2>/dev/null
tail -n 6 $OUT/hybrid-log.txt | cut -c1-250
