# the next session's first call: session 19's hybrid figures were all taken on H100s. On whatever card comes:
# the hybrid roofline and verify curve (is the 32-node point above the 64-node one again?), the tree with
# batch-fusion (tree-bf: its packed verify on a hybrid, never timed), the tree and the chain checked at batch 1 (4 on
# an H200) and timed at 8; then the 8B pair's trees at batch 1
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
CHECK=1; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && CHECK=1,4
timeout -s INT 330 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,bench,roofline,projection --builds tree-bf,tree,chain \
  --batch-sizes 1,8 --check-batch-sizes $CHECK --limit 4 --max-new-tokens 32 --bench-timeout 90 \
  --tree-sizes 1,16,32,48,64,65,128 --contexts 512 --budget-s 320 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md /tmp/hb/bench.log $OUT/ 2>/dev/null
rm -rf /tmp/hybrid-bench
timeout 220 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-fr,tree --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 215 > $OUT/s-log.txt 2>&1; echo "8b rc=$?"
cp $OUT/s/session.json $OUT/session-8b.json 2>/dev/null; rm -f $OUT/s/session.json
tail -n 16 $OUT/hybrid-log.txt | cut -c1-250
