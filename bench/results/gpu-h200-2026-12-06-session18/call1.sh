# session 18 call 1: the WY gated delta kernel with its root peeled (a 64-node draft's verify is 65 tokens, one
# past the WY tile: it ran the PATHS kernel before), its GPU tests, the kernel variants at 65 nodes, the roofline
# (verify curve with 64 and 65 nodes), and where the tree and chain steps' time goes (step_profile, batch 1)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_triton_delta_wy.py tests/hybrid/test_triton_pipeline.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 2 $OUT/gpu-tests.txt
timeout 100 python3 bench/recurrent_tree_kernels.py --nodes 65 --out $OUT/rtk65.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a "^wy " $OUT/rtk-log.txt | head -14
timeout -s INT 220 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,16,32,64,65,128 --contexts 512 --budget-s 205 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
W=/tmp/hybrid-bench/qwen3.5-9b
timeout 130 python3 bench/step_profile.py $W/build-tree $W/build-chain --batch-size 1 --limit 1 --max-new-tokens 32 --ar --out /tmp/sp > $OUT/step-profile-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp/profile.json $OUT/ 2>/dev/null
tail -n 30 $OUT/step-profile-log.txt | cut -c1-200
