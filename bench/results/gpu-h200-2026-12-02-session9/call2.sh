# call 2: issue 14 through the CLI (new shrink tables, grouped packed attention), then a profile of one b64 decode
. bench/results/gpu-h200-2026-12-02-session9/setup.sh
timeout 470 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds chain,chain-bf,tree-bf,readme-bf \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 460 --bench-limit-s 105 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
timeout 110 python3 bench/step_profile.py /tmp/zoo8b/build-tree-bf /tmp/zoo8b/build-chain --batch-size 64 --out $OUT/p > $OUT/p-log.txt 2>&1; echo "profile rc=$?"
tar czf $OUT/traces.tgz -C $OUT/p . 2>/dev/null && rm -f $OUT/p/trace-*.json
tail -30 $OUT/s-log.txt; tail -34 $OUT/p-log.txt
