# The next session's first call (issue 17), about 430 s (T= scales it): issue 17's four targets on whatever card
# comes (an H200 is what the issue states), with the depth-10 tree. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; T=430 bash bench/results/gpu-2026-12-07-session28/next.sh
# 1. gpu_bench --quick: the AR step against the roofline, its launch breakdown, the drafter step;
# 2. `specir bench --check` at b1, code completion 4 x 64: tree-fr-d10k8b64 and tree-fr (depth 6);
# 3. bf12_step: BF12 against bf16 through one AR step, bits compared;
# 4. tree-fr-d10k8b64's step, every op priced apart;
# 5. the tree verify's attention swept on this card (attention_tune.py; its tile is an H100's), --apply, and the
#    depth-10 bench again (the applied table comes back in attention_tiles.txt).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c5; rm -rf $R; mkdir -p $R
T=${T:-430}
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
B="--batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70"
timeout $((T * 70 / 430)) python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn \
  --budget-s $((T * 65 / 430)) > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack
grep -E "copy bandwidth|AR step|step " $R/gb-log.txt | head -9 | cut -c1-200
left=$((T * 230 / 430 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr-d10k8b64,tree-fr \
  $B --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/s-log.txt | head -4
left=$((T * 270 / 430 - SECONDS))
[ $left -gt 25 ] && timeout $left python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt 2>/dev/null
left=$((T * 300 / 430 - SECONDS))
[ $left -gt 20 ] && [ -d /tmp/zoo8b/build-tree-fr-d10k8b64 ] && timeout $left python3 bench/step_profile.py \
  /tmp/zoo8b/build-tree-fr-d10k8b64 --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1
echo "sp at ${SECONDS}s"; pack; grep -h "^  op" $R/sp-log.txt 2>/dev/null | head -8
left=$((T * 350 / 430 - SECONDS))
[ $left -gt 30 ] && timeout $left python3 bench/attention_tune.py --out $R/attention_tune.json \
  --cases "verify 8B tree-65" --budget-s $((left - 8)) > $R/at-log.txt 2>&1
python3 bench/attention_tune.py --apply $R/attention_tune.json > $R/apply-log.txt 2>&1; cat $R/apply-log.txt
grep -A4 "^ATTENTION_TILES" backends/triton/kernels/attention.py > $R/attention_tiles.txt; pack; tail -n 5 $R/at-log.txt 2>/dev/null | cut -c1-220
rm -f /tmp/zoo8b/*.stamp
left=$((T - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/h200_session.py --out $R/after --stages compile,bench \
  --builds tree-fr-d10k8b64 $B --budget-s $((left - 4)) > $R/after-log.txt 2>&1
echo "after rc=$? at ${SECONDS}s"; pack; grep -A2 "^build " $R/after-log.txt | head -3
