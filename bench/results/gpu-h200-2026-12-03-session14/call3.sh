# call 3 (2026-12-03, session 14, after call 2 ran out of memory at 32 slots with 4096-token contexts): specir serve on the H200 at the 8B shape with bucketed prefill shapes
# (prefill_shapes.py: rows a power of two, tokens from fixed sizes, <= 2048 a forward), every one captured
# at the server's warm-up, cache-only forwards sharing one buffer pool; concurrency 32 and 8, two rounds, --max-model-len 2048 (default)
. bench/results/gpu-h200-2026-12-03-session14/setup.sh
[ -f /tmp/zoo8b/p.spec ] || { timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"; }
timeout 470 python3 bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes batch-fusion --concurrency 32,8 --repeats 2 --max-tokens 48 --out $OUT/serve > $OUT/serve-log.txt 2>&1; echo "serve rc=$?"
grep -h "warm-up\|Error\|error" $OUT/serve/serve-*.log > $OUT/serve-logs.txt 2>&1; tail -n 5 $OUT/serve/serve-*.log >> $OUT/serve-logs.txt 2>&1
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> $OUT/serve-logs.txt 2>&1
rm -rf $OUT/c $OUT/serve/build-* $OUT/serve/bench-* $OUT/serve/serve-*.log $OUT/serve/*.png
tail -n 30 $OUT/serve-log.txt
