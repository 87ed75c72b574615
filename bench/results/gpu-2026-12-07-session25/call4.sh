# Session 25's fourth call (warm): tree-fr's step priced op by op on the same H100 (the baseline of call 3's draft).
R=/tmp/n4; mkdir -p $R
timeout 70 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
tar -C $R -czf $OUT/call4.tgz --exclude="trace-*" .; grep -h "^  op" $R/sp-log.txt | head -5
