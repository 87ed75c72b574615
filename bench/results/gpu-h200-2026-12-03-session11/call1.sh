# call 1 (2026-12-03): after unpack zeroes only the rows of the op's largest forward (not B x N: 1.45 ms
# of tree-bf's 23.8 ms step at b64) and batch-fusion{narrow} narrows the tree's levels too (depth_at):
# the batch-fusion builds at 1/8/32/64 (code-completion, 8 prompts, 96 tokens, --check); the issue's
# verbatim `tree-verify,batch-fusion` at batch 1/2/4/8 on mixed prompt lengths (2 prompts of each
# workload), token-forced; the per-segment profile of the tree builds at b64
. bench/results/gpu-h200-2026-12-03-session11/setup.sh
timeout 140 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds chain-bf,tree-bf,tree-bf-narrow,issue-bf \
  --budget-s 135 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
timeout 235 python3 bench/h200_session.py --out $OUT/s --stages bench --builds chain-bf,tree-bf-narrow,tree-bf \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 230 --bench-limit-s 75 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
for w in code-completion docstrings prose refactor; do head -2 specir/zoo/workloads/$w.jsonl; done > /tmp/mixed.jsonl
timeout 90 python3 -m specir.cli.main bench /tmp/zoo8b/build-issue-bf --prompts /tmp/mixed.jsonl --limit 8 --batch-size 1,2,4,8 \
  --max-new-tokens 64 --check --out $OUT/m > $OUT/m-log.txt 2>&1; echo "mixed rc=$?"
timeout 80 python3 bench/step_profile.py /tmp/zoo8b/build-tree-bf-narrow /tmp/zoo8b/build-tree-bf --batch-size 64 --out $OUT/p > $OUT/p-log.txt 2>&1; echo "profile rc=$?"
rm -f $OUT/p/trace-*.json
grep -A14 "^build " $OUT/s-log.txt | head -14; tail -8 $OUT/m-log.txt; grep -h "generate 1\|segment" $OUT/p-log.txt
