# Session 28's second call (issue 17), about 300 s: the product's b1 figure on the default protocol.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session28/call2.sh
# 1. `specir bench --check` at b1 on every shipped workload, 8 prompts x 64 tokens (bench's defaults), for
#    tree-fr (depth 6, session 15's pick) and tree-fr-d10k8b64 (depth 10);
# 2. `specir bench --check` at b1, code completion, 4 x 64, for two deeper trees: depth 12 (64 nodes), depth 14 (96).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c2; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
timeout 330 python3 bench/h200_session.py --out $R/all --stages inflate,compile,bench --builds tree-fr-d10k8b64,tree-fr \
  --workload all --batch-sizes 1 --limit 8 --max-new-tokens 64 --bench-limit-s 140 --budget-s 320 > $R/all-log.txt 2>&1
echo "all rc=$? at ${SECONDS}s"; pack; grep -A12 "^build " $R/all-log.txt | head -13
left=$((480 - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/h200_session.py --out $R/deep --stages compile,bench \
  --builds tree-fr-d12k8b64,tree-fr-d14k8b96 --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 \
  --budget-s $((left - 5)) > $R/deep-log.txt 2>&1
echo "deep rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/deep-log.txt | head -5
