# session 17 call 3: the WY kernel with its q/k products first (lower register pressure), default 64 / 8 warps:
# its GPU tests, the kernels by variant (a configuration past the shared memory is recorded, not fatal), the roofline
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_triton_delta_wy.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
timeout 150 python3 bench/recurrent_tree_kernels.py --out $OUT/recurrent_tree_kernels.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a -A16 '"gated_delta_wy_us"' $OUT/rtk-log.txt | head -18; grep -a "false" $OUT/rtk-log.txt
timeout -s INT 270 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --budget-s 255 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
