# session 19 call 3: issue 15's remaining figures on this card: the verify-cost curve for trees of 1 to 128 nodes
# (with the kernel breakdown of the AR forward and the largest tree), the tree with the frequency-narrowed drafter
# (tree-fr) checked at batch 1 and 4 and timed at batch 8; then the 8B Llama pair's trees at batch 8 (issue 17)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout -s INT 330 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,roofline,projection --builds tree-fr \
  --batch-sizes 1,4,8 --check-batch-sizes 1,4 --limit 4 --max-new-tokens 32 --bench-timeout 110 \
  --tree-sizes 1,2,4,8,16,32,64,65,128 --contexts 512 --budget-s 320 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
rm -rf /tmp/hybrid-bench
timeout 230 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-fr,tree --batch-sizes 8 \
  --limit 8 --max-new-tokens 64 --bench-limit-s 60 --budget-s 225 > $OUT/s-log.txt 2>&1; echo "8b rc=$?"
cp $OUT/s/session.json $OUT/session-8b.json 2>/dev/null; rm -f $OUT/s/session.json
tail -n 14 $OUT/hybrid-log.txt | cut -c1-250
python3 -c "
import json; d=json.load(open('$OUT/session-8b.json'))
for r in d.get('bench_rows', []): print(r['build'], 'b%s' % r['batch_size'], r.get('workload'), 'speedup %.2fx' % r['speedup'], 'tau %.2f' % r['tau'], 'mismatches', r.get('mismatches'), 'tok/s %.1f' % r['tokens_per_s'])
print({k: v for k, v in d['stages'].items() if not isinstance(v, dict) or 'error' in v or v.get('exit')})
" 2>&1 | tail -6
