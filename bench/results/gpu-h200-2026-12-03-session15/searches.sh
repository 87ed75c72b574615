# the next GPU session's call (not run in session 15): the searches against call 2's sweep at the 8B shape,
# from an empty memory (budget 8) and from a memory seeded by a docstrings search (budgets 4 and 8),
# each restricted to the gpu space; the sweep is read from call2/sweep-report.json (same space, workload, settings)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
rm -rf $OUT/c
timeout -s INT -k 30 ${SEARCH_S:-480} python3 bench/search_sweep.py --spec /tmp/zoo8b/p.spec --target h200 --space gpu --workers 1 \
  --rounds 3 --max-new-tokens 64 --candidate-memory 120 --budget 8 --seed-workload docstrings --seed-budget 4 --seeded-budget 8 \
  --sweep-report bench/results/gpu-h200-2026-12-03-session15/call2/sweep-report.json --stages search,seeded --out /tmp/sr8b >> $OUT/search-log.txt 2>&1; echo "searches rc=$?"
tar czf $OUT/sr8b.tgz --exclude=build --exclude='*.sqlite*' -C /tmp sr8b 2>/dev/null
cp /tmp/sr8b/README.md $OUT/ 2>/dev/null && head -40 /tmp/sr8b/README.md
tail -c 1500 $OUT/search-log.txt | tr '\r' '\n' | tail -n 6
