# call 3 (2026-12-03, session 12): specir serve on the H200 at the 8B shape (issue 18): the speculative build
# (`tree-verify,batch-fusion`, defaults) against the AR build, closed-loop HTTP clients at concurrency 1, 8, 32,
# and `specir bench` of the same build at the same batch sizes (bench/serve_load.py, every step through the CLI)
. bench/results/gpu-h200-2026-12-03-session12/setup.sh
timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/c-log.txt 2>&1; echo "inflate rc=$?"
timeout 470 python3 bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes "tree-verify,batch-fusion" \
  --repeats 2 --max-tokens 64 --out $OUT/serve > $OUT/serve-log.txt 2>&1; echo "serve rc=$?"
tail -n 25 $OUT/serve/serve-*.log > $OUT/serve-logs.txt 2>&1; rm -rf $OUT/c $OUT/serve/build-* $OUT/serve/bench-* $OUT/serve/serve-*.log; tail -n 12 $OUT/serve-log.txt
