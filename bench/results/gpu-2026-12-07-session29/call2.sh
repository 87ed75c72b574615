# Session 29's last device call (issue 17), about 250 s (device time left after failed starts): the product's
# depth-10 build with the split rope launch, token-forced, and the same tree drafting from 16384 ids.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session29/call2.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c2; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
timeout 245 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b64,tree-fr-d10k8b63v16384 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 60 --budget-s 240 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
