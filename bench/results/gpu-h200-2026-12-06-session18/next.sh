# the next session's first call (session 18 had no device time left for it). WY launches at 32 / 4 warps unpeeled
# (session 18 call 3: 26.3 vs 38.4 us at 64 tokens, kernel alone), 8 peeled: the recurrent kernels at 64 tokens
# (those two only), the roofline at 1 / 64 / 65 tokens with its breakdown, then, on an H200 (an H100's 80 GB do not
# hold the tree's batch-8 bench beside --check's judge), the end-to-end benches of the tree and the chain
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 50 python3 bench/recurrent_tree_kernels.py --nodes 64 --precisions tf32x3 --wy-configs 32x4,32x8 --out $OUT/rtk64.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a "^wy " $OUT/rtk-log.txt
STAGES=models,compile,roofline
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && STAGES=models,compile,bench,roofline,projection
timeout -s INT 480 python3 bench/hybrid_bench.py --out /tmp/hb --stages $STAGES --builds tree,chain --batch-sizes 1,8 --limit 4 \
  --max-new-tokens 32 --bench-timeout 170 --tree-sizes 1,64,65 --contexts 512 --budget-s 465 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
tail -n 12 $OUT/hybrid-log.txt | cut -c1-300
