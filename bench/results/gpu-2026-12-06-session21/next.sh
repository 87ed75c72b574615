# The next GPU session's first call (session 21 had no device time: session 20 had spent it).
# Issue 17: the draft step's new kernels (ranking, tree expansion, tree nodes, stacked KV compaction) compiled
# and checked on the GPU, timed against torch, then the 8B zoo pair's tree builds end to end through
# `specir bench --check` (tree-fr, and tree-fr-dt: the drafter's 8-row GEMMs on Triton with the swiglu prologue)
# and the step profile (session 20 call 3: tree-fr 3.67-3.71x on an H100, 902 launches a step);
# issue 15: session 20's next.sh (the WY kernel without its 32-token tile), never run.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session21/next.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/triton/test_triton_ranking.py tests/triton/test_triton_tree_expand.py \
  tests/triton/test_triton_tree_nodes.py tests/triton/test_triton_kv_cache.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/gpu-tests.txt | cut -c1-200
timeout 60 python3 bench/draft_step_kernels.py --batch-sizes 1,8,64 --out $OUT/draft-step-kernels.json > $OUT/dsk-log.txt 2>&1
echo "dsk rc=$?"; tail -n 16 $OUT/dsk-log.txt
timeout 230 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-fr,tree-fr-dt --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 225 > $OUT/s-log.txt 2>&1; echo "8b rc=$?"
cp $OUT/s/session.json $OUT/session-8b.json 2>/dev/null; rm -f $OUT/s/session.json
timeout 90 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr /tmp/zoo8b/build-tree-fr-dt --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out /tmp/sp8 > $OUT/sp8-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp8/profile.json $OUT/sp8-profile.json 2>/dev/null
rm -rf /tmp/zoo8b; python3 -c "import torch; torch.cuda.empty_cache()"
timeout -s INT 100 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,16,24,32,33,48,64,65 \
  --contexts 512 --budget-s 95 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -A3 "build " $OUT/s-log.txt | head -8
grep -h "generate 1\|segment" $OUT/sp8-log.txt | cut -c1-220
grep -i "verify cost\|AR forward" $OUT/hybrid-log.txt | cut -c1-200
