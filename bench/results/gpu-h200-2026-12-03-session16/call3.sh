# call 3 (session 16): the 8B searches through the CLI (`specir search --space`, the space file that
# bench/search_sweep.py writes), from an empty memory (budget 8) and from a memory seeded by a docstrings
# search (budgets 4 and 8), against session 15's sweep of the same space
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
rm -rf $OUT/c /tmp/sr8c
timeout -s INT -k 20 ${SEARCH_S:-420} python3 bench/search_sweep.py --spec /tmp/zoo8b/p.spec --target h200 --space gpu --workers 1 \
  --rounds 3 --max-new-tokens 64 --candidate-memory 120 --budget 8 --seed-workload docstrings --seed-budget 4 --seeded-budget 8 \
  --sweep-report bench/results/gpu-h200-2026-12-03-session15/call2/sweep-report.json --stages search,seeded --out /tmp/sr8c >> $OUT/search-log.txt 2>&1; echo "searches rc=$?"
tar czf $OUT/sr8c.tgz --exclude=build --exclude='*.sqlite*' -C /tmp sr8c 2>/dev/null
cp /tmp/sr8c/README.md $OUT/ 2>/dev/null && head -26 /tmp/sr8c/README.md
tail -c 1500 $OUT/search-log.txt | tr '\r' '\n' | tail -n 6
