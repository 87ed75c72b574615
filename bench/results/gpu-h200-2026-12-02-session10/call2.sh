# call 2: where a step's time goes, per step segment (CUDA events around each), at batch 8 and 64;
# continuous batching with all 192 shipped prompts through 64 slots, token-forced
. bench/results/gpu-h200-2026-12-02-session10/setup.sh
timeout 135 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile --builds chain,chain-bf,tree-bf,tree-bf-narrow \
  --budget-s 130 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
timeout 170 python3 bench/step_profile.py /tmp/zoo8b/build-chain /tmp/zoo8b/build-chain-bf --batch-size 8,64 --ar --out $OUT/p1 > $OUT/p1-log.txt 2>&1; echo "profile1 rc=$?"
timeout 90 python3 bench/step_profile.py /tmp/zoo8b/build-tree-bf /tmp/zoo8b/build-tree-bf-narrow --batch-size 8 --out $OUT/p2 > $OUT/p2-log.txt 2>&1; echo "profile2 rc=$?"
rm -f $OUT/p1/trace-*.json $OUT/p2/trace-*.json
cat specir/zoo/workloads/*.jsonl > /tmp/all.jsonl
timeout 150 python3 -m specir.cli.main bench /tmp/zoo8b/build-chain-bf --prompts /tmp/all.jsonl --limit 192 --batch-size 64 --arrival-rate 0 \
  --max-new-tokens 96 --check --out $OUT/a > $OUT/a-log.txt 2>&1; echo "arrivals rc=$?"
grep -h "generate 1\|segment" $OUT/p1-log.txt $OUT/p2-log.txt; tail -4 $OUT/a-log.txt
