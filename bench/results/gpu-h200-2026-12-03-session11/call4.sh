# call 4 (2026-12-03): continuous batching through the CLI after the first prefill of each shape is set-up
# (its kernels compile in a warm run, as a capture's do) and the table gives the decode speedup beside the
# busy-time one; chain-bf (the device budget left covers one build), 48 requests per workload through 32 slots, token-forced
. bench/results/gpu-h200-2026-12-03-session11/setup.sh
timeout 110 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds chain-bf \
  --budget-s 105 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
for b in chain-bf; do
  timeout 130 python3 -m specir.cli.main bench /tmp/zoo8b/build-$b --prompts /tmp/all.jsonl --limit 192 --batch-size 32 --arrival-rate 0 \
    --max-new-tokens 96 --check --out $OUT/a-$b > $OUT/a-$b-log.txt 2>&1; echo "arrivals $b rc=$?"
done
rm -rf $OUT/c; tail -q -n 5 $OUT/a-*-log.txt
