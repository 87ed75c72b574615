# Session 24 call 1 (issue 17; session 23's next.sh, reordered). Session 23's call 3 ran the rope + KV epilogue's kernel
# tests on an H200 and all 17 that ran failed, the report cut off by the time limit; the epilogue has since been rewritten
# (the halves picked out by sums, not a permute and split) and compiled forwards do not use it
# (rope_kv_epilogue.VERIFIED_ON_GPU = False). gemv_kernel was restructured in 348b3c9 and no GPU has run it either.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call1.sh
# When the epilogue's tests pass, /tmp/rope-kv-verified marks it for call 2 on the same warm machine (which then sets
# VERIFIED_ON_GPU = True in its copy of the tree before it builds: the commit after this call does the same here).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
rm -f /tmp/rope-kv-verified
timeout 150 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear_rope_kv.py \
  > $OUT/gpu-rope-tests.txt 2>&1; rc=$?; echo "rope epilogue tests rc=$rc at ${SECONDS}s"
[ $rc -eq 0 ] && touch /tmp/rope-kv-verified
grep -m 20 "^E \|passed\|failed" $OUT/gpu-rope-tests.txt | cut -c1-300
timeout 170 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear.py \
  tests/triton/test_linear_overlap.py > $OUT/gpu-linear-tests.txt 2>&1; echo "linear tests rc=$? at ${SECONDS}s"
grep -m 8 "^E \|passed\|failed" $OUT/gpu-linear-tests.txt | cut -c1-300
# BF12's prologue GEMVs take 168 registers (3 programs a SM): capped at 128 they compile without spills; and the
# weights' cache policy (new, LinearConfig.weight_cache): L2-only (.cg) or L1 evict-first, so that the streamed weights
# stop evicting x and the BF12 tables from L1 (BF12 loads x at compute time: an L1 miss is on its critical path)
left=$((560 - SECONDS))
timeout $left python3 bench/gemv_chain.py --out $OUT/chain.json --layers 16 --bf12-layers 8 --iters "" --bf12-iters "" \
  --variant bf12:maxnreg=128 --variant bf12:weight_cache=cg --variant bf12:weight_cache=evict_first \
  --variant bf16:weight_cache=cg > $OUT/chain-log.txt 2>&1; echo "chain rc=$? at ${SECONDS}s"; tail -n 9 $OUT/chain-log.txt
