# session 18 call 3: conv1d PATHS at block 1024 / 4 warps (call 2: 12.1 vs 19.8 us a launch at 65 tokens); the WY
# solve without its last squaring; the tree build a 64-node tree with its root (budget 63: a 64-token verify);
# hybrid_bench's parent gives its checkpoint-making memory back (call 2's benches ran out of an H100's 80 GB beside
# it). The conv and WY tests on the GPU, the recurrent kernels at 64 tokens, then hybrid_bench end to end: bench
# --check at batch 1 and 8 (tree, chain), the roofline at 1 / 64 / 65 tokens with its kernel breakdown, the projection
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/triton_backend/test_conv1d_tree_paths.py tests/hybrid/test_triton_delta_wy.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
timeout 75 python3 bench/recurrent_tree_kernels.py --nodes 64 --precisions tf32x3 --out $OUT/rtk64.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a "^wy \|^conv " $OUT/rtk-log.txt | head -12
timeout -s INT 400 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,roofline,projection --builds tree,chain \
  --batch-sizes 1,8 --limit 4 --max-new-tokens 32 --bench-timeout 165 --tree-sizes 1,64,65 --contexts 512 --budget-s 385 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
tail -n 12 $OUT/hybrid-log.txt | cut -c1-300
