# call 3: where a decode step's time goes (decode-only torch.profiler), and whether bench's first timed generate carries first-time work
. bench/results/gpu-h200-2026-12-02-session9/setup.sh
timeout 150 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile --builds chain,tree,tree-bf --budget-s 140 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
timeout 200 python3 bench/step_profile.py /tmp/zoo8b/build-chain /tmp/zoo8b/build-tree-bf --ar --batch-size 64 --out $OUT/p64 > $OUT/p64-log.txt 2>&1; echo "profile b64 rc=$?"
timeout 100 python3 bench/step_profile.py /tmp/zoo8b/build-tree --ar --batch-size 1 --out $OUT/p1 > $OUT/p1-log.txt 2>&1; echo "profile b1 rc=$?"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_swiglu.py tests/triton/test_triton_rope.py > $OUT/tests.txt 2>&1; echo "tests rc=$?"; tail -2 $OUT/tests.txt
tar czf $OUT/traces.tgz -C $OUT p64 p1 2>/dev/null; rm -f $OUT/p64/trace-*.json $OUT/p1/trace-*.json
grep -v "^  .* ms .*x" $OUT/p64-log.txt | tail -8; grep -A16 "^tree-bf b64\|^build-tree-bf b64" $OUT/p64-log.txt; grep -A12 "^build-chain b64" $OUT/p64-log.txt; grep -A10 "^ar b64" $OUT/p64-log.txt; tail -30 $OUT/p1-log.txt
