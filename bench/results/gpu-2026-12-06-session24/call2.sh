# Session 24 call 2 (issue 17's targets, one run): the 8B zoo pair through `specir bench --check` at batch 1 (tree-fr:
# the default fusions; tree-fr-all: every opt-in fusion of issue 17; tree-fr-dt: the drafter's 8-row GEMMs on the Triton
# skinny GEMM), the step profile with every op priced apart (--per-op: draft against verify against an AR step), the AR
# step as built against stock, then the GPU benchmark's AR step, breakdown and draft sections and the GEMV chain (bf16 and
# BF12). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call2.sh
# Every result goes to /tmp/c2, packed into $R/call2.tgz after each stage (the call may be cut short). Right after call 1 on the same warm machine,
# the rope epilogue runs in tree-fr-all's forwards when call 1's tests passed (/tmp/rope-kv-verified).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if [ -f /tmp/rope-kv-verified ]; then  # call 1 on this warm machine passed the epilogue's kernel tests
  sed -i 's/^VERIFIED_ON_GPU = False/VERIFIED_ON_GPU = True/' backends/triton/kernels/rope_kv_epilogue.py
fi
grep -n "^VERIFIED_ON_GPU" backends/triton/kernels/rope_kv_epilogue.py
R=/tmp/c2; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
BUILDS=${BUILDS:-tree-fr,tree-fr-all,tree-fr-dt}
timeout 260 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds $BUILDS --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 255 > $R/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"; pack
grep -A5 "^build " $R/s-log.txt | head -6
timeout 90 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr --ar --per-op --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out $R/sp > $R/sp-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"; pack
grep -h "generate 1\|^  op\|segment" $R/sp-log.txt | cut -c1-200 | head -24
timeout 70 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-all --ar-as-built --per-op --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out $R/spa > $R/spa-log.txt 2>&1; echo "spa rc=$? at ${SECONDS}s"; pack
grep -h "generate 1\|^  op" $R/spa-log.txt | cut -c1-200 | head -16
left=$((580 - SECONDS))
if [ $left -gt 70 ]; then
  timeout $((left - 5)) python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn \
    --budget-s $((left - 15)) > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack; tail -n 12 $R/gb-log.txt
fi
