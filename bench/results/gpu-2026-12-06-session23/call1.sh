# session 23 call 1 (issue 17: launch overlap). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session23/call1.sh
# 1. the overlap tests compiled on the GPU (a dependent chain of overlapped linears, eager and in a CUDA graph, bit for
#    bit against plain launches; the fusion's forwards); 2. bench/gemv_chain.py: the 8B layer's four GEMVs x 32 layers,
#    plain against overlapped (0/2/4/8 iterations prefetched), bf16 and BF12; 3. the 8B zoo pair through `specir bench
#    --check` at b1: tree-fr (defaults) and tree-fr-nlo (norm_linear + swiglu_linear + launch_overlap); 4. the step
#    profile of tree-fr-nlo with the stock AR and the AR as built, in the time left.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p $OUT/all
timeout 140 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_overlap.py tests/triton_backend/test_launch_overlap.py \
  > $OUT/all/gpu-tests.txt 2>&1; echo "tests rc=$? at ${SECONDS}s"
tail -n 3 $OUT/all/gpu-tests.txt | cut -c1-300
timeout 110 python3 bench/gemv_chain.py --out $OUT/all/chain.json --layers 32 --bf12-layers 8 > $OUT/all/chain-log.txt 2>&1
echo "chain rc=$? at ${SECONDS}s"; tail -n 14 $OUT/all/chain-log.txt
timeout 230 python3 bench/h200_session.py --out $OUT/all/s --stages inflate,compile,bench --builds tree-fr,tree-fr-nlo --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 225 > $OUT/all/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"
left=$((575 - SECONDS))
if [ $left -gt 60 ]; then
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-nlo --ar --ar-as-built --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out /tmp/sp8 > $OUT/all/sp8-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
  cp /tmp/sp8/profile.json $OUT/all/sp8-profile.json 2>/dev/null
fi
tar -C $OUT -czf $OUT/call1.tgz all
grep -A3 "^build " $OUT/all/s-log.txt | head -5
grep -h "generate 1\|segment\|launches" $OUT/all/sp8-log.txt 2>/dev/null | cut -c1-200 | head -20
rm -rf $OUT/all
