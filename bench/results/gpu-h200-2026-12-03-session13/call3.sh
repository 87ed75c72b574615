# call 3 (2026-12-03, session 13, warm after call 2): specir search at the 8B shape on the H200, a short
# budget from an empty memory: what one GPU candidate evaluation costs (compile, guard out of process,
# timing against AR in interleaved rounds, forcing of the timed outputs), with the reference shared
# between the guard's judge and the forcing (Reference.shared)
. bench/results/gpu-h200-2026-12-03-session13/setup.sh
timeout 430 python3 -m specir.cli.main search /tmp/zoo8b/p.spec --target h200 --workload code-completion --budget 5 --workers 1 \
  --candidate-memory 120 --max-new-tokens 32 --rounds 2 --memory $OUT/memory.sqlite --out $OUT/search > $OUT/search-log.txt 2>&1; echo "search rc=$?"
mkdir -p $OUT/keep; cp $OUT/search/report.json $OUT/search/report.md $OUT/search/best.spec $OUT/keep/ 2>/dev/null
rm -rf $OUT/search $OUT/memory.sqlite; tail -c 3000 $OUT/search-log.txt | tr '\r' '\n' | tail -n 25
python3 -c "
import json; r=json.load(open('$OUT/keep/report.json'))
for c in r.get('candidates', []): print(c.get('passes'), c.get('status'), c.get('seconds'), (c.get('measured') or {}).get('speedup'))
" 2>&1 | tail -12
