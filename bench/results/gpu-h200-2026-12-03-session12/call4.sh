# call 4 (2026-12-03, session 12): issue 16, two-level verification against the best one level on the three
# shipped workloads session 5 did not reach (docstrings, refactor, prose), batch 1 and 8, every row
# `specir bench --check`, the cost model's prediction beside each row (bench/two_level.py)
. bench/results/gpu-h200-2026-12-03-session12/setup.sh
timeout 90 python3 bench/h200_session.py --out $OUT/c --stages inflate --builds "" --budget-s 85 > $OUT/c-log.txt 2>&1; echo "inflate rc=$?"
timeout 480 python3 bench/two_level.py --out $OUT/tl --target h200 --zoo /tmp/zoo8b --builds chain,tree,tl-window,tl-ngram-drafter \
  --workloads docstrings,refactor,prose --batch-sizes 1,8 --limit 4 --max-new-tokens 64 --budget-s 470 --predict-reserve-s 70 \
  > $OUT/tl-log.txt 2>&1; echo "two-level rc=$?"
rm -rf $OUT/c; ls $OUT/tl; tail -n 30 $OUT/tl/README.md
