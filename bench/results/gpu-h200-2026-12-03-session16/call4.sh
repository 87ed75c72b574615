# call 4 (session 16, fresh machine): the conv1d tree kernel's PATHS variant on the GPU (tests, bit-equal to
# the walk), the recurrent tree kernels by variant at the Qwen3.5-9B shape, then hybrid_bench's roofline
# stage again (the 64-node verify with the new conv kernel, per kernel family)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/triton_backend/test_conv1d_tree_paths.py tests/hybrid/test_triton_recurrent.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
timeout 90 python3 bench/recurrent_tree_kernels.py --out $OUT/recurrent_tree_kernels.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
timeout -s INT 230 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --budget-s 215 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
python3 -c "
import json; r=json.load(open('$OUT/recurrent_tree_kernels.json')); print(r['conv1d_us']); print({k: v for k, v in r['gated_delta_us'].items()}); print(r['checks'] if not all(r['checks'].values()) else 'checks ok')
" 2>&1 | tail -4
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
python3 -c "
import json; r=json.load(open('$OUT/hybrid_bench.json'))['stages']['roofline']['result']['kernels']['64']
print(r['kernel_ms_per_forward'], [(g['name'][:30], g['ms']) for g in r['groups'][:6]])" 2>&1 | tail -2
