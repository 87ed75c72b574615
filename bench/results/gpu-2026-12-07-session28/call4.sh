# Session 28's fourth call (issue 17), about 230 s: the attention tile A/B on one machine. Run after session 15's
# setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session28/call4.sh
# 1. `specir bench --check` at b1, code completion 4 x 64, tree-fr-d10k8b64 with the rule's attention launches;
# 2. the target's tree-verify attention swept at contexts 256, 512 and 2048 (attention_tune.py), the winner applied;
# 3. the same bench again, rebuilt (the applied attention.py comes back).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c4; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call4.tgz --exclude="trace-*" . ; }
B="--builds tree-fr-d10k8b64 --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70"
timeout 150 python3 bench/h200_session.py --out $R/before --stages inflate,compile,bench $B --budget-s 145 \
  > $R/before-log.txt 2>&1; echo "before rc=$? at ${SECONDS}s"; pack; grep -A2 "^build " $R/before-log.txt | head -3
timeout 50 python3 bench/attention_tune.py --out $R/attention_tune.json --cases "verify 8B tree-65" --budget-s 40 \
  > $R/at-log.txt 2>&1; echo "attention_tune rc=$? at ${SECONDS}s"
python3 bench/attention_tune.py --apply $R/attention_tune.json > $R/apply-log.txt 2>&1; cat $R/apply-log.txt
cp backends/triton/kernels/attention.py $R/; pack; tail -n 5 $R/at-log.txt | cut -c1-220
rm -f /tmp/zoo8b/*.stamp
timeout 80 python3 bench/h200_session.py --out $R/after --stages compile,bench $B --budget-s 78 > $R/after-log.txt 2>&1
echo "after rc=$? at ${SECONDS}s"; pack; grep -A2 "^build " $R/after-log.txt | head -3
