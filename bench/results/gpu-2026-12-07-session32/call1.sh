# Session 32's first device call (issue 17), about 400 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/call1.sh
# 1. gemv_chain with each layer's decode attention (context 512) between qkv and o: plain, overlapped, and
#    overlapped with the attention letting o start at once while o prefetches 0 or all 8 of its K iterations into
#    L2 (each also with the attention itself overlapped); bits checked against the plain chain;
# 2. gpu_bench's AR step and breakdown with the default fusions, and with fusion{attention_prefetch=true};
# 3. gpu_bench's draft section: tree-3l, and tree-3l-v (the README pipeline's draft-vocab{size=16384}).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c32; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 150 python3 bench/gemv_chain.py --out $R/chain --layers 32 --iters 0 --bf12-layers 8 --bf12-iters 0 \
  --attention 512 --o-iters 0,8 > $R/chain-log.txt 2>&1
echo "gemv_chain rc=$? at ${SECONDS}s"; pack; tail -n 14 $R/chain-log.txt
for v in base ap; do
  P=""; [ $v = ap ] && P="fusion{attention_prefetch=true}"
  timeout 75 python3 bench/gpu_bench.py --out $R/gb-$v --quick --skip draft verify packed_attn e2e peers \
    --budget-s 65 --passes "$P" > $R/gb-$v-log.txt 2>&1
  echo "gpu_bench $v rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx" $R/gb-$v-log.txt | cut -c1-120
  grep -E "^\| linear|^\| attention" $R/gb-$v/gpu_bench.md 2>/dev/null | cut -c1-110
done
left=$((570 - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/gpu_bench.py --out $R/gd --quick \
  --skip ar_step breakdown verify packed_attn e2e peers --budget-s $((left - 5)) > $R/gd-log.txt 2>&1
echo "draft rc=$? at ${SECONDS}s"; pack; grep -E "^step " $R/gd-log.txt | head -8 | cut -c1-200
