# Session 24 call 2 (issue 17's targets, one run): the 8B zoo pair through `specir bench --check` at batch 1 (tree-fr:
# the default fusions; tree-fr-all: every opt-in fusion of issue 17; tree-fr-dt: the drafter's 8-row GEMMs on the Triton
# skinny GEMM), the step profile with every op priced apart (--per-op: draft against verify against an AR step), the AR
# step as built against stock, then the GPU benchmark's AR step, breakdown and draft sections and the GEMV chain (bf16 and
# BF12). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call2.sh
# Every result goes under $OUT as it comes (the call may be cut short).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
BUILDS=${BUILDS:-tree-fr,tree-fr-all,tree-fr-dt}
timeout 260 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds $BUILDS --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 255 > $OUT/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"
grep -A5 "^build " $OUT/s-log.txt | head -6
timeout 90 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr --ar --per-op --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out $OUT/sp > $OUT/sp-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
grep -h "generate 1\|^  op\|segment" $OUT/sp-log.txt | cut -c1-200 | head -24
timeout 70 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-all --ar-as-built --per-op --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out $OUT/spa > $OUT/spa-log.txt 2>&1; echo "spa rc=$? at ${SECONDS}s"
grep -h "generate 1\|^  op" $OUT/spa-log.txt | cut -c1-200 | head -16
left=$((590 - SECONDS))
if [ $left -gt 70 ]; then
  timeout $((left - 5)) python3 bench/gpu_bench.py --out $OUT/gb --quick --skip peers e2e verify packed_attn \
    --budget-s $((left - 15)) > $OUT/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; tail -n 12 $OUT/gb-log.txt
fi
