# call 1 (2026-12-03, session 15, fresh machine): the GPU tests of the one-workspace-per-forward change,
# the 8B shape inflated, then the sweep of bench/search_sweep.py's gpu space (11 pipelines) through the
# search's own evaluation, resumable in /tmp/sw8b across calls; worker logs kept (stall dumps)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/step/test_prefill_caches_only.py tests/triton_backend/test_device_ar_chain.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 3 $OUT/gpu-tests.txt
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
rm -rf $OUT/c
timeout -s INT -k 30 ${SWEEP_S:-300} python3 bench/search_sweep.py --spec /tmp/zoo8b/p.spec --target h200 --space gpu --workers 1 --rounds 2 \
  --max-new-tokens 32 --candidate-memory 120 --stages sweep --out /tmp/sw8b >> $OUT/sweep-log.txt 2>&1; echo "sweep rc=$?"
tar czf $OUT/sw8b.tgz --exclude=build --exclude='*.sqlite*' -C /tmp sw8b 2>/dev/null
cp /tmp/sw8b/sweep/report.json $OUT/sweep-report.json 2>/dev/null
nvidia-smi --query-gpu=memory.used --format=csv >> $OUT/gpu-tests.txt
tail -c 2500 $OUT/sweep-log.txt | tr '\r' '\n' | tail -n 12
python3 -c "
import json; r=json.load(open('/tmp/sw8b/sweep/report.json'))
for c in r.get('candidates', []): print(c.get('pipeline'), c.get('status'), c.get('seconds'), c.get('measured_speedup'), c.get('stages'))
" 2>&1 | tail -14
