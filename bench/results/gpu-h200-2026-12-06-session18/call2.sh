# session 18 call 2: WY at 32 / 8 by default (call 1: 41.6 vs 59.8 us a launch at 65 tokens on an H100), the tree
# build at depth 8 / top-k 6 / budget 64 (the trained hybrid's tree-b64, tau 6.69); GPU tests of the WY kernel, the
# WY and conv1d launch variants at 65 tokens, then hybrid_bench end to end (bench --check at batch 1 and 8, the
# roofline at 1 / 64 / 65 tokens with its kernel breakdown, the projection at the trained hybrid's taus)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 45 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_triton_delta_wy.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
timeout 90 python3 bench/recurrent_tree_kernels.py --nodes 65 --precisions tf32x3,tf32 --out $OUT/rtk65.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a "^wy \|^conv " $OUT/rtk-log.txt | head -20
timeout -s INT 380 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,roofline,projection --builds tree,chain \
  --batch-sizes 1,8 --limit 4 --max-new-tokens 32 --bench-timeout 150 --tree-sizes 1,64,65 --contexts 512 --budget-s 365 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
tail -n 12 $OUT/hybrid-log.txt | cut -c1-300
