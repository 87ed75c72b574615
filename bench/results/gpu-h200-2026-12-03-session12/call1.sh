# call 1 (2026-12-03, session 12): batch-fusion's shrink table on by default, priced for the compile target:
# the issue's pipeline verbatim (`tree-verify,batch-fusion`), its narrowed twin and the chain's default
# (`batch-fusion`) at 1/8/32/64 (code-completion, 8 prompts, 96 tokens, --check); the issue's pipeline at
# batch 1/2/4/8 on mixed prompt lengths (2 prompts of each workload), token-forced; and continuous batching
# of the issue's pipeline (48 requests per workload through 32 slots, a request joins as soon as one leaves)
. bench/results/gpu-h200-2026-12-03-session12/setup.sh
timeout 130 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds issue-bf,issue-bf-narrow,chain-default \
  --budget-s 125 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
grep -h "batch.budget\|draft\.tree\|draft\.chain" /tmp/zoo8b/build-*/pipeline.spec > $OUT/budgets.txt
timeout 250 python3 bench/h200_session.py --out $OUT/s --stages bench --builds issue-bf,issue-bf-narrow,chain-default \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 245 --bench-limit-s 90 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
for w in code-completion docstrings prose refactor; do head -2 specir/zoo/workloads/$w.jsonl; done > /tmp/mixed.jsonl
timeout 75 python3 -m specir.cli.main bench /tmp/zoo8b/build-issue-bf --prompts /tmp/mixed.jsonl --limit 8 --batch-size 1,2,4,8 \
  --max-new-tokens 64 --check --out $OUT/m > $OUT/m-log.txt 2>&1; echo "mixed rc=$?"
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
timeout 110 python3 -m specir.cli.main bench /tmp/zoo8b/build-issue-bf --prompts /tmp/all.jsonl --limit 192 --batch-size 32 --arrival-rate 0 \
  --max-new-tokens 96 --check --out $OUT/a > $OUT/a-log.txt 2>&1; echo "arrivals rc=$?"
rm -rf $OUT/c $OUT/m/bench.png $OUT/a/bench.png $OUT/s/log.txt
grep -A14 "^build " $OUT/s-log.txt | head -14; tail -6 $OUT/m-log.txt; tail -7 $OUT/a-log.txt
