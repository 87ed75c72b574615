# the next session's first call (session 20 ran out of device time before it): the WY kernel without its 32-token tile (gated_delta_wy SLOW_TILE: 18 .. 33 tokens in a 64-token
# tile): the hybrid's verify-cost curve again, then the WY kernel tests compiled on the GPU
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout -s INT 140 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,16,24,32,33,48,64,65 \
  --kernels-at 24,64 --contexts 512 --budget-s 135 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -i "verify cost\|AR forward" $OUT/hybrid-log.txt | cut -c1-200
timeout 45 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_triton_delta_wy.py -x > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/gpu-tests.txt | cut -c1-200
