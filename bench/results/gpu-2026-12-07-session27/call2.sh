# Session 27's second call (issue 17), about 580 s: the BF12 tree with the skinny GEMM's tuned tilings. Run after
# session 15's setup, with carry=[".whl"], once call1's results are copied to call1/ beside this file:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session27/call2.sh
# 1. call1's gate+up and down tilings written into linear_config.GEMM_TILES, then qkv and o tuned and written;
# 2. `specir bench --check` at b1 on tree-fr-bf12 (tree-fr with pack-weights{format=bf12}) as built with them;
# 3. its step, every op priced apart (step_profile --per-op --ar-as-built);
# 4. the GEMM's rolled RMSNorm prologue against the norm apart at 2, 4, 8 rows (norm_prologue_rows.py).
# The applied linear_config.py comes back with the results: the tiles `specir bench` timed.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
D=bench/results/gpu-2026-12-07-session27
R=/tmp/c2; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
[ -f $D/call1/gemm_tune.json ] && python3 bench/gemm_tune.py --apply $D/call1/gemm_tune.json > $R/apply1-log.txt 2>&1
timeout 150 python3 bench/gemm_tune.py --out $R/gemm_tune.json --shapes qkv,o --budget-s 135 > $R/gt-log.txt 2>&1
echo "gemm_tune rc=$? at ${SECONDS}s"; tail -n 4 $R/gt-log.txt | cut -c1-250
python3 bench/gemm_tune.py --apply $R/gemm_tune.json > $R/apply2-log.txt 2>&1; cat $R/apply1-log.txt $R/apply2-log.txt 2>/dev/null | tail -n 8
cp backends/triton/kernels/linear_config.py $R/; pack
left=$((400 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr-bf12 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 90 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/s-log.txt | head -4
left=$((520 - SECONDS))
[ $left -gt 30 ] && [ -d /tmp/zoo8b/build-tree-fr-bf12 ] && timeout $left python3 bench/step_profile.py \
  /tmp/zoo8b/build-tree-fr-bf12 --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp-tree-fr-bf12 > $R/sp-tree-fr-bf12-log.txt 2>&1
echo "sp tree-fr-bf12 at ${SECONDS}s"; pack; grep -h "^  op" $R/sp-tree-fr-bf12-log.txt 2>/dev/null | head -8
left=$((585 - SECONDS))
[ $left -gt 30 ] && timeout $left python3 bench/norm_prologue_rows.py --out $R/npr.json > $R/npr-log.txt 2>&1
echo "norm prologue rows at ${SECONDS}s"; pack; tail -n 17 $R/npr-log.txt 2>/dev/null
