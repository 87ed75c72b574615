# The next GPU session's first call (issue 17), about 570 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/next.sh
# 1. the rope + KV epilogue's kernel tests and the standalone rope tests: session 24's H200 run failed the first epilogue
#    test with 14 of 64 q values one ulp off; the sm_90 PTX showed the standalone rope kernel fusing a rounded product
#    into a bf16 fma (fixed in 2248b83: round_product). If they pass, this call's tree sets
#    rope_kv_epilogue.VERIFIED_ON_GPU = True (commit the same after the call);
# 2. the 8B zoo pair through `specir bench --check` at b1: tree-fr-dt (the drafter's 8-row GEMMs on the Triton skinny
#    GEMM: session 24 priced the draft at 0.367x an AR step, ~1.1 ms of it the drafter's cuBLAS GEMMs and their split-K
#    reduces) and, when (1) passed, tree-fr-all (every opt-in fusion, the epilogue included); each priced per op;
# 3. the GEMV chain: plain against the persistent GEMV (bf16, BF12), BF12's register cap and L2-only weight loads;
# 4. the linear kernel tests (the persistent GEMV, the weights' cache policy, the restructured gemv_kernel: none run on a
#    GPU yet), in the time left.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/n; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
timeout 110 python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear_rope_kv.py \
  tests/triton/test_triton_rope.py > $R/gpu-rope-tests.txt 2>&1; rc=$?; echo "rope tests rc=$rc at ${SECONDS}s"; pack
grep -m 12 "^E \|passed\|failed" $R/gpu-rope-tests.txt | cut -c1-300
BUILDS=tree-fr-dt
if [ $rc -eq 0 ]; then
  sed -i 's/^VERIFIED_ON_GPU = False/VERIFIED_ON_GPU = True/' backends/triton/kernels/rope_kv_epilogue.py
  BUILDS=tree-fr-dt,tree-fr-all
fi
timeout 200 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds $BUILDS --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 50 --budget-s 195 > $R/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"; pack
grep -A4 "^build " $R/s-log.txt | head -5
for b in ${BUILDS//,/ }; do
  [ -d /tmp/zoo8b/build-$b ] || continue
  timeout 45 python3 bench/step_profile.py /tmp/zoo8b/build-$b --ar-as-built --per-op --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out $R/sp-$b > $R/sp-$b-log.txt 2>&1; echo "sp $b rc=$? at ${SECONDS}s"; pack
  grep -h "^  op" $R/sp-$b-log.txt | head -8
done
left=$((450 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/gemv_chain.py --out $R/chain.json --layers 16 --bf12-layers 8 --iters "" \
  --bf12-iters "" --variant bf16:persistent=4 --variant bf12:persistent=4 --variant bf12:maxnreg=128 \
  --variant bf12:weight_cache=cg --variant bf16:weight_cache=cg > $R/chain-log.txt 2>&1
echo "chain at ${SECONDS}s"; pack; tail -n 9 $R/chain-log.txt
left=$((565 - SECONDS))
[ $left -gt 30 ] && timeout $left python3 -m pytest -q -x --tb=short -p no:cacheprovider tests/triton/test_linear.py \
  > $R/gpu-linear-tests.txt 2>&1; echo "linear tests at ${SECONDS}s"; pack
grep -m 8 "^E \|passed\|failed" $R/gpu-linear-tests.txt | cut -c1-300
