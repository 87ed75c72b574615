# call 1 (2026-12-03, session 14, fresh machine): specir serve on the H200 at the 8B shape with prefills
# captured as CUDA graphs (one per shape, replayed), the server's own step / prefill seconds per round
# (/metrics), and the specir bench --arrival-rate 0 comparator; concurrency 8 and 32, two rounds each
. bench/results/gpu-h200-2026-12-03-session14/setup.sh
timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"
timeout 470 python3 bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes batch-fusion --concurrency 8,32 --repeats 2 --max-tokens 48 --out $OUT/serve > $OUT/serve-log.txt 2>&1; echo "serve rc=$?"
tail -n 30 $OUT/serve/serve-*.log > $OUT/serve-logs.txt 2>&1; rm -rf $OUT/c $OUT/serve/build-* $OUT/serve/bench-* $OUT/serve/serve-*.log $OUT/serve/*.png
tail -n 24 $OUT/serve-log.txt
