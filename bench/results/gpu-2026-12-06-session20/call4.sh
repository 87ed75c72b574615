# session 20 call 4: why does the hybrid's verify of 24-32 tree nodes cost more than one of 48-64 (call 3: 24: 1.615x AR,
# 32: 1.441x, 64: 1.254x)? The forward's kernels at 16, 24, 32 and 64 nodes (cuBLAS by row count is monotone:
# session 19's gemm_rows)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout -s INT 230 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,16,24,32,64 \
  --kernels-at 16,24,32,64 --contexts 512 --budget-s 220 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -i "verify cost\|AR forward" $OUT/hybrid-log.txt | cut -c1-200
python3 - <<PY
import json
r = json.load(open("$OUT/hybrid_bench.json"))["stages"]["roofline"]["result"]["kernels"]
for n, k in r.items():
    print(n, "nodes:", k["kernel_ms_per_forward"], "ms;", "; ".join("%s %.3f x%g" % (g["name"][:38], g["ms"], g["launches"]) for g in k["groups"][:7]))
PY
