# Session 31's device call (issue 17), about 520 s: the four targets on this commit, and one probe of the GEMV split rule.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session31/call.sh
# 1. `specir bench --check` at b1, code completion 4 x 64, on the README's GPU pipeline (tree-fr-d10k8b63v16384);
# 2. gpu_bench's AR step and launch breakdown (the roofline target), then the same with the GEMV split rule's
#    MIN_ITERS_PER_SPLIT 4 -> 2 (qkv and o 4 -> 8 K ranges, down 8 -> 16) and with TARGET_PROGRAMS doubled too:
#    the small-N GEMVs' tails, 0.33 ms of session 30's gap (the rule changes bf16's and BF12's order alike);
# 3. bf12_step: BF12 against bf16 through one AR step, bits compared;
# 4. gpu_bench's draft section: the tree-3l step against AR (the draft target).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c31; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call31.tgz --exclude="trace-*" . ; }
timeout 200 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b63v16384 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 195 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/s-log.txt | head -4
probe() {  # $1: label, $2: MIN_ITERS_PER_SPLIT, $3: TARGET_PROGRAMS
  timeout 60 python3 -c "
import runpy, sys
sys.path.insert(0, 'bench')
from specir.backends.triton.kernels import linear_config as c
c.MIN_ITERS_PER_SPLIT, c.TARGET_PROGRAMS = $2, $3
sys.argv = ['bench/gpu_bench.py', '--out', '$R/gb-$1', '--quick', '--skip', 'draft', 'verify', 'packed_attn', 'e2e',
            'peers', '--budget-s', '55']
runpy.run_path('bench/gpu_bench.py', run_name='__main__')" > $R/gb-$1-log.txt 2>&1
  echo "gpu_bench $1 rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx 512" $R/gb-$1-log.txt | cut -c1-120
  grep -E "^\| linear|^\| attention" $R/gb-$1/gpu_bench.md 2>/dev/null | cut -c1-110
}
probe rule 4 528
probe min2 2 528
probe min2t2 2 1056
timeout 55 python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 4 $R/bf12-log.txt 2>/dev/null
left=$((570 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/gpu_bench.py --out $R/gd --quick \
  --skip ar_step breakdown verify packed_attn e2e peers --budget-s $((left - 5)) > $R/gd-log.txt 2>&1
echo "draft rc=$? at ${SECONDS}s"; pack; grep -E "^step " $R/gd-log.txt | head -6 | cut -c1-200
