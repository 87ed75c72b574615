# Session 32's first device call (issue 17), about 420 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/call1.sh
# 1. gemv_chain with each layer's decode attention (context 512) between qkv and o: plain, overlapped, and
#    overlapped with the attention letting o start at once while o prefetches 0, 4 or 8 K iterations into L2
#    (all of its weights at 8); bits checked against the plain chain;
# 2. gpu_bench's AR step and breakdown as is, and with the attention letting o start + o prefetching 8 or 4, and
#    with 8 and the attention launched overlapped too (launch_pdl: it waits for qkv at its first instruction);
# 3. gpu_bench's draft section: tree-3l, and tree-3l-v (the README pipeline's draft-vocab{size=16384}).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c32; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 150 python3 bench/gemv_chain.py --out $R/chain --layers 32 --iters 0 --bf12-layers 8 --bf12-iters 0 \
  --attention 512 --o-iters 0,4,8 > $R/chain-log.txt 2>&1
echo "gemv_chain rc=$? at ${SECONDS}s"; pack; tail -n 12 $R/chain-log.txt
probe() {  # $1: label, $2: attention lets o start (True/False), $3: o's overlap_iters (bf16 and BF12), $4: the attention
           # launched overlapped too (True; default False)
  timeout 70 python3 -c "
import runpy, sys
sys.path.insert(0, 'bench')
from specir.backends.triton.kernels import attention as a, linear_config as c
a.LETS_NEXT_START, a.OVERLAPPED = $2, ${4:-False}
if $3:
    c.GEMV_FORMAT_OVERRIDES[('bf16', 4096, 4096)] = {'overlap_iters': $3}
    c.GEMV_FORMAT_OVERRIDES[('bf12', 4096, 4096)] = {'overlap_iters': $3}
sys.argv = ['bench/gpu_bench.py', '--out', '$R/gb-$1', '--quick', '--skip', 'draft', 'verify', 'packed_attn', 'e2e',
            'peers', '--budget-s', '60']
runpy.run_path('bench/gpu_bench.py', run_name='__main__')" > $R/gb-$1-log.txt 2>&1
  echo "gpu_bench $1 rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx" $R/gb-$1-log.txt | cut -c1-120
  grep -E "^\| linear|^\| attention" $R/gb-$1/gpu_bench.md 2>/dev/null | cut -c1-110
}
probe base False 0
probe o8 True 8
probe o4 True 4
probe o8p True 8 True
left=$((560 - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/gpu_bench.py --out $R/gd --quick \
  --skip ar_step breakdown verify packed_attn e2e peers --budget-s $((left - 5)) > $R/gd-log.txt 2>&1
echo "draft rc=$? at ${SECONDS}s"; pack; grep -E "^step " $R/gd-log.txt | head -8 | cut -c1-200
