# call 2 (2026-12-03, session 15, fresh machine): after call 1's sweep ran out of GPU memory at its sixth
# candidate (the pool worker kept every candidate's engine; fixed: search/measure.py closes it and
# specir.device_memory.release gives the memory back), the gpu space swept again with longer timing
# (3 rounds, 64 tokens a prompt), then the search from an empty memory restricted to the same space
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
rm -rf $OUT/c
timeout -s INT -k 30 ${SWEEP_S:-400} python3 bench/search_sweep.py --spec /tmp/zoo8b/p.spec --target h200 --space gpu --workers 1 \
  --rounds 3 --max-new-tokens 64 --candidate-memory 120 --budget ${BUDGET:-8} --seed-workload docstrings --seed-budget ${SEED_BUDGET:-5} \
  --seeded-budget ${SEEDED_BUDGET:-8} --stages ${STAGES:-sweep,search} --out /tmp/sw8b2 >> $OUT/sweep-log.txt 2>&1; echo "sweep rc=$?"
tar czf $OUT/sw8b2.tgz --exclude=build --exclude='*.sqlite*' -C /tmp sw8b2 2>/dev/null
cp /tmp/sw8b2/README.md $OUT/ 2>/dev/null
tail -c 1500 $OUT/sweep-log.txt | tr '\r' '\n' | tail -n 6
for f in sweep search seed-docstrings seeded; do [ -f /tmp/sw8b2/$f/report.json ] && python3 -c "
import json; r=json.load(open('/tmp/sw8b2/$f/report.json')); print('== $f', r.get('rank_correlation'))
for c in r.get('candidates', []): print(c.get('pipeline'), c.get('status'), c.get('seconds'), c.get('measured_speedup'), c.get('tau'), (c.get('error') or '')[:80])
" 2>&1 | tail -14; done
