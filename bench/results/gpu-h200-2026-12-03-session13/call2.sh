# call 2 (2026-12-03, session 13, warm after call 1): the same at concurrency 32, two rounds
. bench/results/gpu-h200-2026-12-03-session13/setup.sh
timeout 500 python3 bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes batch-fusion --concurrency 32 --repeats 2 --max-tokens 48 --out $OUT/serve > $OUT/serve-log.txt 2>&1; echo "serve rc=$?"
tail -n 30 $OUT/serve/serve-*.log > $OUT/serve-logs.txt 2>&1; rm -rf $OUT/serve/build-* $OUT/serve/bench-* $OUT/serve/serve-*.log $OUT/serve/*.png
tail -n 14 $OUT/serve-log.txt
