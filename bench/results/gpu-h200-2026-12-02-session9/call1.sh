# call 1: kernel tests on CUDA (grouped packed attention, n_rows KV writes, fused SwiGLU), gpu_bench quick, inflate for call 2
. bench/results/gpu-h200-2026-12-02-session9/setup.sh
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/logs/gpu.txt 2>&1
timeout 170 python3 -m pytest -q -p no:cacheprovider -x tests/triton/test_triton_attention.py tests/triton/test_triton_kv_cache.py \
  tests/triton/test_triton_rope.py tests/triton/test_linear_swiglu.py > $OUT/logs/tests.txt 2>&1; echo "tests rc=$?" | tee -a $OUT/logs/tests.txt
tail -3 $OUT/logs/tests.txt
timeout 330 python3 bench/gpu_bench.py --out $OUT/gb --quick --skip peers e2e --budget-s 300 > $OUT/logs/gpu_bench.txt 2>&1; echo "gpu_bench rc=$?"
timeout 80 python3 bench/h200_session.py --out $OUT/inflate --stages inflate --budget-s 75 > $OUT/logs/inflate.txt 2>&1; echo "inflate rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs inflate 2>/dev/null; rm -rf $OUT/logs $OUT/inflate
tail -45 $OUT/gb/gpu_bench.md 2>/dev/null
