# call 2 (2026-12-03, session 12): continuous batching through the CLI with batch-fusion's defaults (shrink on,
# priced for h200), after the first prefill of each shape became set-up: the issue's tree pipeline and the
# chain's, 48 requests per workload through 32 slots (a request joins as soon as one leaves), token-forced
. bench/results/gpu-h200-2026-12-03-session12/setup.sh
timeout 120 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds issue-bf,chain-default \
  --budget-s 115 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
for b in issue-bf chain-default; do
  timeout 150 python3 -m specir.cli.main bench /tmp/zoo8b/build-$b --prompts /tmp/all.jsonl --limit 192 --batch-size 32 --arrival-rate 0 \
    --max-new-tokens 96 --check --out $OUT/a-$b > $OUT/a-$b-log.txt 2>&1; echo "arrivals $b rc=$?"
done
rm -rf $OUT/c $OUT/a-*/bench.png; tail -q -n 7 $OUT/a-*-log.txt
