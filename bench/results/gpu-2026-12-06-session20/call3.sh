# session 20 call 3: issue 17: the swiglu folded into the down projection's prologue (fusion{swiglu_linear=true}, opt-in
# until timed on a GPU) on the 8B zoo pair's tree-fr at b1 through `specir bench --check`, and where its step goes;
# issue 15: the hybrid's verify-cost curve again, finer around 32 nodes (session 19 had 32 nodes above 64)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 230 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds tree-fr,tree-fr-sw --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 225 > $OUT/s-log.txt 2>&1; echo "8b rc=$?"
cp $OUT/s/session.json $OUT/session-8b.json 2>/dev/null; rm -f $OUT/s/session.json
timeout 100 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-sw /tmp/zoo8b/build-tree-fr --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/sp8-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp8/profile.json $OUT/sp8-profile.json 2>/dev/null
rm -rf /tmp/zoo8b; python3 -c "import torch; torch.cuda.empty_cache()"
timeout -s INT 190 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --tree-sizes 1,16,24,32,40,48,64 \
  --contexts 512 --budget-s 180 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -A3 "build " $OUT/s-log.txt | head -5
grep -h "generate 1\|segment" $OUT/sp8-log.txt | cut -c1-220
grep -i "verify\|AR forward" $OUT/hybrid_bench.md | head -12 | cut -c1-200
