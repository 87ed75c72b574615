# Session 24 call 1 = session 23's next.sh (issue 17). Session 23's call 3 ran the rope + KV epilogue's kernel tests on an
# H200 and all 17 that ran failed, the report cut off by the time limit; the epilogue has since been rewritten (the
# halves picked out by sums, not a permute and split) and compiled forwards do not use it
# (rope_kv_epilogue.VERIFIED_ON_GPU = False). gemv_kernel was restructured in 348b3c9 (each program's partial
# finished in the kernel's body, `_split_reduce` shared): no GPU has run the restructured kernel either, so the
# linear kernel tests come first. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call1.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 220 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear.py \
  tests/triton/test_linear_overlap.py > $OUT/gpu-linear-tests.txt 2>&1; echo "linear tests rc=$? at ${SECONDS}s"
tail -n 3 $OUT/gpu-linear-tests.txt | cut -c1-300
timeout 150 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear_rope_kv.py \
  > $OUT/gpu-rope-tests.txt 2>&1; echo "rope epilogue tests rc=$? at ${SECONDS}s"
grep -m 20 "^E \|passed\|failed" $OUT/gpu-rope-tests.txt | cut -c1-300
# if the epilogue passes: set VERIFIED_ON_GPU = True, then in a second call time tree-fr-all's AR as built
# (call3.sh's last two steps) and tree-fr against tree-fr-nl (the norms' order where nothing is folded, 49bcead)
# BF12's prologue GEMVs take 168 registers (3 programs a SM): capped at 128 they compile without spills; and the
# weights' cache policy (new, LinearConfig.weight_cache): L2-only (.cg) or L1 evict-first, so that the streamed weights
# stop evicting x and the BF12 tables from L1 (BF12 loads x at compute time: an L1 miss is on its critical path)
timeout 170 python3 bench/gemv_chain.py --out $OUT/chain.json --layers 16 --bf12-layers 8 --iters "" --bf12-iters "" \
  --variant bf16:weight_cache=cg --variant bf12:maxnreg=128 --variant bf12:weight_cache=cg \
  --variant bf12:weight_cache=evict_first > $OUT/chain-log.txt 2>&1; echo "chain rc=$? at ${SECONDS}s"; tail -n 9 $OUT/chain-log.txt
