# Prepared for the next session's device call (issue 17), about 480 s; not run in session 32 (no device time left).
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/next-call.sh
# 1. call4.sh: BF12's order-neutral GEMV fields one at a time in the GEMV chain (the BF12 target);
# 2. gemv_chain with the attention, o prefetching exactly its range (--o-iters all: what attention_prefetch does);
# 3. gpu_bench's AR step with and without fusion{attention_prefetch=true} on this machine (an H200 may rank it
#    otherwise), then the draft section with one drafter level's launch groups (tree-3l, tree-3l-v).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/cn; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
OUT_SAVED=$OUT; OUT=$R bash bench/results/gpu-2026-12-07-session32/call4.sh > $R/call4-log.txt 2>&1; OUT=$OUT_SAVED
echo "call4 at ${SECONDS}s"; pack; tail -n 14 $R/call4-log.txt
timeout 120 python3 bench/gemv_chain.py --out $R/chain --layers 32 --iters 0 --bf12-layers 8 --bf12-iters 0 \
  --attention 512 --o-iters all > $R/chain-log.txt 2>&1
echo "gemv_chain rc=$? at ${SECONDS}s"; pack; tail -n 8 $R/chain-log.txt
for v in base ap; do
  P=""; [ $v = ap ] && P="fusion{attention_prefetch=true}"
  timeout 75 python3 bench/gpu_bench.py --out $R/gb-$v --quick --skip draft verify packed_attn e2e peers \
    --budget-s 65 --passes "$P" > $R/gb-$v-log.txt 2>&1
  echo "gpu_bench $v rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx 512" $R/gb-$v-log.txt | cut -c1-120
done
left=$((570 - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/gpu_bench.py --out $R/gd --quick \
  --skip ar_step breakdown verify packed_attn e2e peers --budget-s $((left - 5)) > $R/gd-log.txt 2>&1
echo "draft rc=$? at ${SECONDS}s"; pack; grep -E "^step " $R/gd-log.txt | head -8 | cut -c1-200
grep -A14 "tree-3l-v: one drafter tree level" $R/gd/gpu_bench.md 2>/dev/null
