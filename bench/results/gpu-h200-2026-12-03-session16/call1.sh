# call 1 (session 16, fresh machine): the GPU test of analyze() on the device, the 8B shape inflated, the
# cost-model scoring cost with the BF12 statistics analysed on the GPU (cold cache), then the search from an
# empty memory (budget 8, gpu space) against session 15's sweep
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/bf12/test_stats_on_gpu.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
rm -rf $OUT/c
timeout 90 python3 bench/search_scoring.py /tmp/zoo8b/p.spec > $OUT/scoring.txt 2>&1; echo "scoring rc=$?"; tail -n 5 $OUT/scoring.txt
timeout -s INT -k 20 ${SEARCH_S:-330} python3 bench/search_sweep.py --spec /tmp/zoo8b/p.spec --target h200 --space gpu --workers 1 \
  --rounds 3 --max-new-tokens 64 --candidate-memory 120 --budget 8 \
  --sweep-report bench/results/gpu-h200-2026-12-03-session15/call2/sweep-report.json --stages search --out /tmp/sr8b >> $OUT/search-log.txt 2>&1; echo "search rc=$?"
tar czf $OUT/sr8b.tgz --exclude=build --exclude='*.sqlite*' -C /tmp sr8b 2>/dev/null
cp /tmp/sr8b/README.md $OUT/ 2>/dev/null && head -30 /tmp/sr8b/README.md
tail -c 1500 $OUT/search-log.txt | tr '\r' '\n' | tail -n 6
