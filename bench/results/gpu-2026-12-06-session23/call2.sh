# session 23 call 2 (issue 17: launch overlap alone). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session23/call2.sh
# 1. the BF12 overlap test (call 1's packed inside the graph capture: a test bug); 2. bench/gemv_chain.py (call 1's
# timed out compiling); 3. tree-fr against tree-fr-o (default fusions + launch_overlap) through `specir bench --check`
# at b1; 4. the step profile of tree-fr-o with the stock AR and the AR as built (launch_overlap alone).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p $OUT/all
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_overlap.py > $OUT/all/gpu-tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -n 2 $OUT/all/gpu-tests.txt | cut -c1-300
timeout 150 python3 bench/gemv_chain.py --out $OUT/all/chain.json --layers 32 --bf12-layers 8 > $OUT/all/chain-log.txt 2>&1
echo "chain rc=$? at ${SECONDS}s"; tail -n 9 $OUT/all/chain-log.txt
timeout 200 python3 bench/h200_session.py --out $OUT/all/s --stages inflate,compile,bench --builds tree-fr,tree-fr-o --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 195 > $OUT/all/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"
left=$((560 - SECONDS))
if [ $left -gt 50 ]; then
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-o --ar --ar-as-built --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out /tmp/sp8 > $OUT/all/sp8-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
  cp /tmp/sp8/profile.json $OUT/all/sp8-profile.json 2>/dev/null
fi
tar -C $OUT -czf $OUT/call2.tgz all
grep -A3 "^build " $OUT/all/s-log.txt | head -5
grep -h "generate 1" $OUT/all/sp8-log.txt 2>/dev/null | cut -c1-220 | head -6
rm -rf $OUT/all
