# Session 24's one call (issue 17), sized for the device time left after eight failed machine starts (about 300 s of
# wall time). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call.sh
# In order of what the issue needs most, each stage only when the time left fits it:
# 1. the rope + KV epilogue's kernel tests compiled on the GPU (session 23's H200 run failed all 17 that ran; rewritten
#    since). When they pass, this call's copy of the tree sets rope_kv_epilogue.VERIFIED_ON_GPU = True before it builds
#    (the commit after the call does the same in the repository);
# 2. the GPU benchmark's AR step against its roofline, its launch breakdown and its draft section (gpu_bench.py --quick);
# 3. the 8B zoo pair through `specir bench --check` at batch 1: tree-fr (default fusions), then tree-fr-all (every
#    opt-in fusion of issue 17, the epilogue included when verified);
# 4. the step profile of tree-fr with every op priced apart (--per-op: the draft against the verify against an AR step);
# 5. the GEMV chain, bf16 against BF12: the persistent GEMV (new), BF12's register cap, the weights' L2-only loads (new).
# Results go to /tmp/c, packed into $OUT/call.tgz after each stage (the call may be cut short).
T=${T:-300}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call.tgz --exclude="trace-*" . ; }
timeout 80 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear_rope_kv.py \
  > $R/gpu-rope-tests.txt 2>&1; rc=$?; echo "rope epilogue tests rc=$rc at ${SECONDS}s"; pack
grep -m 12 "^E \|passed\|failed" $R/gpu-rope-tests.txt | cut -c1-300
BUILDS=tree-fr
if [ $rc -eq 0 ]; then
  sed -i 's/^VERIFIED_ON_GPU = False/VERIFIED_ON_GPU = True/' backends/triton/kernels/rope_kv_epilogue.py
  BUILDS=tree-fr,tree-fr-all
fi
timeout 70 python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn --budget-s 65 \
  > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack; tail -n 7 $R/gb-log.txt | cut -c1-200
left=$((T - 10 - SECONDS))
if [ $left -gt 100 ]; then
  timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds $BUILDS --batch-sizes 1 \
    --limit 4 --max-new-tokens 64 --bench-limit-s 50 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
  echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
fi
left=$((T - 10 - SECONDS))
if [ $left -gt 50 ] && [ -d /tmp/zoo8b/build-tree-fr ]; then
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr --ar --per-op --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out $R/sp > $R/sp-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"; pack
  grep -h "generate 1\|^  op" $R/sp-log.txt | cut -c1-170 | head -16
fi
left=$((T - 5 - SECONDS))
if [ $left -gt 40 ]; then
  timeout $left python3 bench/gemv_chain.py --out $R/chain.json --layers 16 --bf12-layers 8 --iters "" --bf12-iters "" \
    --variant bf16:persistent=4 --variant bf12:persistent=4 --variant bf12:maxnreg=128 \
    --variant bf12:weight_cache=cg --variant bf16:weight_cache=cg > $R/chain-log.txt 2>&1
  echo "chain rc=$? at ${SECONDS}s"; pack; tail -n 8 $R/chain-log.txt
fi
