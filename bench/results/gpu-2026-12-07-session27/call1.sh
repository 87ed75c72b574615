# Session 27's first call (issue 17), about 500 s, issue 17's four targets first. Run after session 15's setup, with
# carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session27/call1.sh
# 1. the GPU benchmark's AR step against its roofline, its launch breakdown and the 3-layer drafter's step
#    (gpu_bench --quick): targets AR <= 1.10x the roofline, draft <= 0.35x an AR step;
# 2. `specir bench --check` at b1: tree-fr (depth 6, the shape session 15's sweep chose) and two deeper trees
#    (tree-fr-d10k4b64, tree-fr-d10k8b64: tau 7.3-7.5 on the shipped pair against 5.6): target >= 4.5x;
# 3. BF12 against bf16 through one AR step (bf12_step.py): target >= 1.20x, bits equal;
# 4. tree-fr's step (and tree-fr-d10k8b64's), every op priced apart, with the target's AR step as built (step_profile --per-op --ar-as-built):
#    the breakdown where a target is missed;
# 5. the skinny GEMM's tiling at 65 rows for gate+up and down, with the time left (gemm_tune.py): the BF12 tree.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c1; rm -rf $R; mkdir -p $R
T=${T:-500}  # the call's seconds: each stage ends by its share of T
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 105 python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn --budget-s 100 \
  > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack; tail -n 9 $R/gb-log.txt | cut -c1-200
left=$((T * 330 / 500 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr,tree-fr-d10k8b64,tree-fr-d10k4b64 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 55 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A5 "^build " $R/s-log.txt | head -6
left=$((T * 400 / 500 - SECONDS))
[ $left -gt 40 ] && timeout $((left > 90 ? 90 : left)) python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt 2>/dev/null
left=$((T * 480 / 500 - SECONDS))
[ $left -gt 30 ] && [ -d /tmp/zoo8b/build-tree-fr ] && timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr \
  $(ls -d /tmp/zoo8b/build-tree-fr-d10k8b64 2>/dev/null) \
  --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 --out $R/sp-tree-fr > $R/sp-tree-fr-log.txt 2>&1
echo "sp tree-fr at ${SECONDS}s"; pack; grep -h "^  op" $R/sp-tree-fr-log.txt 2>/dev/null | head -8
left=$((T - SECONDS))
[ $left -gt 60 ] && timeout $left python3 bench/gemm_tune.py --out $R/gemm_tune.json --shapes gate+up,down \
  --budget-s $((left - 15)) > $R/gt-log.txt 2>&1
echo "gemm_tune at ${SECONDS}s"; pack; tail -n 5 $R/gt-log.txt 2>/dev/null | cut -c1-250
