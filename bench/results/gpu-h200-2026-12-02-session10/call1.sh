# call 1: tree-bf-narrow (built in session 9, unmeasured) against tree-bf and chain-bf through the CLI;
# then continuous batching (all 192 shipped prompts, 64 slots, refilled as requests finish)
. bench/results/gpu-h200-2026-12-02-session10/setup.sh
timeout 400 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-bf-narrow,tree-bf,chain-bf \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 395 --bench-limit-s 105 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
timeout 150 python3 -m specir.cli.main bench /tmp/zoo8b/build-chain-bf --prompts /tmp/all.jsonl --batch-size 64 --arrival-rate 0 \
  --max-new-tokens 96 --out $OUT/a > $OUT/a-log.txt 2>&1; echo "arrivals rc=$?"
tail -14 $OUT/s-log.txt; tail -8 $OUT/a-log.txt
