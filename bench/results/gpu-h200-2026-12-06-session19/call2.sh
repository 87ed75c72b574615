# session 19 call 2: the drafter's lm head cut to its 32768 most frequent ids (draft-vocab{order=frequency}), on
# both production shapes, b1, through `specir bench --check`: the hybrid (Qwen3.5-9B-like, 248k vocabulary) tree
# against the same tree with the narrowed drafter (issue 15), then the 8B Llama pair inflated from the zoo (128k
# vocabulary; real acceptance) tree vs tree-fr (issue 17's b1 tree figure), then where the 8B step's time goes
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout -s INT 215 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,projection --builds tree-fr,tree \
  --batch-sizes 1 --check-batch-sizes 1 --limit 4 --max-new-tokens 32 --bench-timeout 80 --budget-s 205 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
rm -rf /tmp/hybrid-bench; python3 -c "import torch; torch.cuda.empty_cache()"
timeout 220 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-fr,tree --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 215 > $OUT/s-log.txt 2>&1; echo "8b rc=$?"
timeout 100 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr /tmp/zoo8b/build-tree --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/sp8-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp8/profile.json $OUT/sp8-profile.json 2>/dev/null
tail -n 8 $OUT/hybrid-log.txt | cut -c1-250
python3 -c "
import json; d=json.load(open('$OUT/s/session.json'))
for r in d.get('bench_rows', []): print(r['build'], 'b%s' % r['batch_size'], r.get('workload'), 'speedup %.2fx' % r['speedup'], 'tau %.2f' % r['tau'], 'mismatches', r.get('mismatches'), 'tok/s %.1f' % r['tokens_per_s'])
print({k: v for k, v in d['stages'].items() if not isinstance(v, dict) or 'error' in v or v.get('exit')})
" 2>&1 | tail -8
grep -h "generate 1\|segment" $OUT/sp8-log.txt | cut -c1-220
