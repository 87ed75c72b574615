# Session 25's third call (warm machine after call2.sh; /tmp/zoo8b persists): tree-fr-dtn and tree-fr through
# `specir bench --check` at b1, then tree-fr-dtn's step priced op by op.
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session25/call3.sh
R=/tmp/n3; mkdir -p $R
timeout 185 python3 bench/h200_session.py --out $R/s --stages compile,bench --builds tree-fr-dtn,tree-fr --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 55 --budget-s 180 > $R/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"
tar -C $R -czf $OUT/call3.tgz .; grep -A4 "^build " $R/s-log.txt | head -5
timeout 60 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-dtn --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
tar -C $R -czf $OUT/call3.tgz --exclude="trace-*" .; grep -h "^  op" $R/sp-log.txt | head -5
