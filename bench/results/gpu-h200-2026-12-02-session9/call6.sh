# call 6: the README's GPU flow builds after the ranking change and the ranked-rows cost model (their shrink tables change)
. bench/results/gpu-h200-2026-12-02-session9/setup.sh
timeout 330 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds readme-bf,readme-tree \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 320 --bench-limit-s 110 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
tail -12 $OUT/s-log.txt
