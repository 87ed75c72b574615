# Session 28's third call (issue 17), about 480 s (T= scales it). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session28/call3.sh
# 1. `specir bench --check` at b1, code completion 4 x 64, tree-fr-d10k8b64 as committed (tree_nodes' ranks in
#    their own launch);
# 2. the attention kernel's launches swept at the pair's b1 shapes (attention_tune.py), the winners applied;
# 3. the same bench with them, and tree-fr's; the applied attention.py comes back;
# 4. tree-fr-d10k8b64's step, every op priced apart (step_profile --per-op);
# 5. gpu_bench's AR step against its roofline, its launch breakdown and the drafter step; bf12_step.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c3; rm -rf $R; mkdir -p $R
T=${T:-480}
pack() { tar -C $R -czf $OUT/call3.tgz --exclude="trace-*" . ; }
B="--batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 60"
timeout $((T * 110 / 480)) python3 bench/h200_session.py --out $R/before --stages inflate,compile,bench \
  --builds tree-fr-d10k8b64 $B --budget-s $((T * 105 / 480)) > $R/before-log.txt 2>&1
echo "before rc=$? at ${SECONDS}s"; pack; grep -A2 "^build " $R/before-log.txt | head -3
timeout $((T * 120 / 480)) python3 bench/attention_tune.py --out $R/attention_tune.json --budget-s $((T * 100 / 480)) \
  > $R/at-log.txt 2>&1; echo "attention_tune rc=$? at ${SECONDS}s"
python3 bench/attention_tune.py --apply $R/attention_tune.json > $R/apply-log.txt 2>&1; cat $R/apply-log.txt
cp backends/triton/kernels/attention.py $R/; pack; tail -n 9 $R/at-log.txt | cut -c1-220
rm -f /tmp/zoo8b/*.stamp  # recompile: the builds' launch manifests list the applied tiles
left=$((T * 340 / 480 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/after --stages compile,bench --builds tree-fr-d10k8b64,tree-fr $B \
  --budget-s $((left - 5)) > $R/after-log.txt 2>&1
echo "after rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/after-log.txt | head -4
left=$((T * 380 / 480 - SECONDS))
[ $left -gt 25 ] && [ -d /tmp/zoo8b/build-tree-fr-d10k8b64 ] && timeout $left python3 bench/step_profile.py \
  /tmp/zoo8b/build-tree-fr-d10k8b64 --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1
echo "sp at ${SECONDS}s"; pack; grep -h "^  op" $R/sp-log.txt 2>/dev/null | head -8
left=$((T * 450 / 480 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn \
  --budget-s $((left - 5)) > $R/gb-log.txt 2>&1
echo "gpu_bench at ${SECONDS}s"; pack; grep -E "copy bandwidth|AR step|step " $R/gb-log.txt | head -9 | cut -c1-200
left=$((T - SECONDS))
[ $left -gt 25 ] && timeout $left python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt 2>/dev/null
