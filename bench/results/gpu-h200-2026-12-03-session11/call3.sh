# call 3 (2026-12-03): why continuous batching (call 2: 1.08-1.73x at 32 slots) is far below the static
# batch (2.25x at b32): prefill of joining requests against decode steps, step time by live size, the
# same prompts as one static batch (bench/arrivals_steps.py); then the issue's verbatim
# `tree-verify,batch-fusion` (no shrink: every request its whole tree) at batch 32 and 64
. bench/results/gpu-h200-2026-12-03-session11/setup.sh
timeout 120 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds chain-bf,tree-bf-narrow,issue-bf \
  --budget-s 115 > $OUT/c-log.txt 2>&1; echo "compile rc=$?"
for b in chain-bf tree-bf-narrow; do for w in code-completion refactor; do
  timeout 90 python3 bench/arrivals_steps.py /tmp/zoo8b/build-$b --workload $w --slots 32 --requests 48 --max-new-tokens 96 > $OUT/steps-$b-$w.txt 2>&1; echo "steps $b $w rc=$?"
done; done
timeout 100 python3 bench/h200_session.py --out $OUT/s --stages bench --builds issue-bf \
  --batch-sizes 32,64 --limit 8 --max-new-tokens 96 --budget-s 95 --bench-limit-s 90 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
rm -rf $OUT/c; tail -q -n 4 $OUT/steps-*.txt; grep -A3 "^build " $OUT/s-log.txt | head -3
