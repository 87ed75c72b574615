# call 1 (2026-12-03, session 12): batch-fusion's shrink table on by default, priced for the compile target:
# the issue's pipeline verbatim (`tree-verify,batch-fusion`), its narrowed twin, the chain's default
# (`batch-fusion`) and tree-bf-narrow (re-measured after depth_at stopped cutting under the confidence split)
# at 1/8/32/64 (code-completion, 8 prompts, 96 tokens, --check); the issue's pipeline at batch 1/2/4/8 on
# mixed prompt lengths (2 prompts of each workload), token-forced
. bench/results/gpu-h200-2026-12-03-session12/setup.sh
timeout 140 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds issue-bf,issue-bf-narrow,chain-default,tree-bf-narrow \
  --budget-s 135 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
grep -h -A3 "batch.budget" /tmp/zoo8b/build-issue-bf/pipeline.spec | head -3 > $OUT/issue-bf-budget.txt
timeout 320 python3 bench/h200_session.py --out $OUT/s --stages bench --builds issue-bf,issue-bf-narrow,chain-default,tree-bf-narrow \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 315 --bench-limit-s 90 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
for w in code-completion docstrings prose refactor; do head -2 specir/zoo/workloads/$w.jsonl; done > /tmp/mixed.jsonl
timeout 90 python3 -m specir.cli.main bench /tmp/zoo8b/build-issue-bf --prompts /tmp/mixed.jsonl --limit 8 --batch-size 1,2,4,8 \
  --max-new-tokens 64 --check --out $OUT/m > $OUT/m-log.txt 2>&1; echo "mixed rc=$?"
rm -rf $OUT/c $OUT/m/bench.png
grep -A18 "^build " $OUT/s-log.txt | head -18; tail -8 $OUT/m-log.txt
