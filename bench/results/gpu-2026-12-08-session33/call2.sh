# Session 33's second device call (issue 17), about 500 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-08-session33/call2.sh
# 1. gpu_bench's AR step and breakdown with and without fusion{attention_prefetch=true} on this machine;
# 2. the draft section with one drafter level's launch groups (tree-3l, tree-3l-v), never run on a GPU before.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c33b; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
for v in base ap; do
  P=""; [ $v = ap ] && P="fusion{attention_prefetch=true}"
  timeout 80 python3 bench/gpu_bench.py --out $R/gb-$v --quick --skip draft verify packed_attn e2e peers \
    --budget-s 70 --passes "$P" > $R/gb-$v-log.txt 2>&1
  echo "gpu_bench $v rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx 512" $R/gb-$v-log.txt | cut -c1-120
done
grep -E "^\| linear|^\| attention" $R/gb-base/gpu_bench.md 2>/dev/null | cut -c1-110
left=$((570 - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/gpu_bench.py --out $R/gd --quick \
  --skip ar_step breakdown verify packed_attn e2e peers --budget-s $((left - 5)) > $R/gd-log.txt 2>&1
echo "draft rc=$? at ${SECONDS}s"; pack; grep -E "^step " $R/gd-log.txt | head -8 | cut -c1-200
grep -A14 "one drafter tree level" $R/gd/gpu_bench.md 2>/dev/null | head -40
