# session 17 call 4: end to end through `specir bench --check` at the Qwen3.5-9B-like shape (random weights: speeds
# valid, acceptance not), tree (WY gated delta kernel) then chain, batch 1 and 8, and the projection at stated taus
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout -s INT 530 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,projection --builds tree,chain \
  --batch-sizes 1,8 --limit 4 --max-new-tokens 32 --bench-timeout 190 --budget-s 515 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
tail -n 12 $OUT/hybrid-log.txt | cut -c1-600
