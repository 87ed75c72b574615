# call 2 (2026-12-03, warm machine of call 1: /tmp/zoo8b builds kept): continuous batching, all 192 shipped
# prompts (48 per workload, each its own run) through 32 slots (refilled as requests finish), every request token-forced, captures off the clock (setup_s);
# the chain-bf static bench that call 1's 75 s cap cut (first bench of the machine: cold Triton kernels)
. bench/results/gpu-h200-2026-12-03-session11/setup.sh
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
for b in chain-bf tree-bf-narrow; do
  timeout 200 python3 -m specir.cli.main bench /tmp/zoo8b/build-$b --prompts /tmp/all.jsonl --limit 192 --batch-size 32 --arrival-rate 0 \
    --max-new-tokens 96 --check --out $OUT/a-$b > $OUT/a-$b-log.txt 2>&1; echo "arrivals $b rc=$?"
done
timeout 110 python3 bench/h200_session.py --out $OUT/s --stages bench --builds chain-bf \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 105 --bench-limit-s 100 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
tail -7 $OUT/a-chain-bf-log.txt; tail -7 $OUT/a-tree-bf-narrow-log.txt; grep -A5 "^build " $OUT/s-log.txt | head -6
