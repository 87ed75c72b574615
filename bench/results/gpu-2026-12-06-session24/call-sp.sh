# Session 24's second call, on the machine call.sh left warm (the 8B builds still under /tmp/zoo8b): the step profile of
# tree-fr with every op priced apart, and the stock AR step. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session24/call-sp.sh
mkdir -p /tmp/c2; timeout 100 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr --ar --per-op --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/c2/sp > /tmp/c2/sp-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/c2/sp-log.txt /tmp/c2/sp/profile.json $OUT/ 2>/dev/null
grep -h "generate 1\|^  op\|segment" /tmp/c2/sp-log.txt | cut -c1-170 | head -30
