# the next session's first call (session 18 had no device time left for it): WY at 32 / 4 warps unpeeled (call 3: 26.3 vs 38.4 us at 64 tokens), 8 peeled;
# the recurrent kernels at 64 tokens (32 / 4 and 32 / 8 only), then the roofline at 1 / 64 / 65 tokens with its breakdown
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 50 python3 bench/recurrent_tree_kernels.py --nodes 64 --precisions tf32x3 --wy-configs 32x4,32x8 --out $OUT/rtk64.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a "^wy " $OUT/rtk-log.txt
timeout -s INT 170 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,64,65 --contexts 512 --budget-s 160 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
