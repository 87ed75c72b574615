# call 1 (2026-12-03, session 13, fresh machine): specir serve on the H200 at the 8B shape after the serve
# warm-up ramp (two steps at every live count 1..capacity) and serve_load's every-prompt warm-up,
# concurrency 1 and 8, two rounds each, with batch-fusion's defaults (the chain, shrink table priced for h200)
. bench/results/gpu-h200-2026-12-03-session13/setup.sh
timeout 100 python3 bench/h200_session.py --out $OUT/c --stages inflate,compile --builds "" --budget-s 95 > $OUT/inflate-log.txt 2>&1; echo "inflate rc=$?"
timeout 440 python3 bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes batch-fusion --concurrency 1,8 --repeats 2 --max-tokens 48 --out $OUT/serve > $OUT/serve-log.txt 2>&1; echo "serve rc=$?"
tail -n 30 $OUT/serve/serve-*.log > $OUT/serve-logs.txt 2>&1; rm -rf $OUT/c $OUT/serve/build-* $OUT/serve/bench-* $OUT/serve/serve-*.log $OUT/serve/*.png
tail -n 14 $OUT/serve-log.txt
