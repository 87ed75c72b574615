# session 18 call 4: the tree end to end at batch 1 (call 3's tree bench ran out of an H100's 80 GB: the engine is
# sized for batch 8 with --check's reference beside it; an H200 fits it), then the projection at the trained taus
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout -s INT 290 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,projection --builds tree \
  --batch-sizes 1 --limit 4 --max-new-tokens 32 --bench-timeout 200 --budget-s 280 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
tail -n 6 $OUT/hybrid-log.txt | cut -c1-300
