# Session 30's last call (issue 17), about 250 s: the draft target on this commit.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session30/call-draft.sh
# 1. gpu_bench's draft section alone: the tree-3l step (the 3-layer drafter's tree, whole vocabulary) against AR;
# 2. the README's pipeline (tree-fr-d10k8b63v16384) built, and its step priced op by op (draft.tree, verify.tree).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/cd; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call-draft.tgz --exclude="trace-*" . ; }
timeout 130 python3 bench/gpu_bench.py --out $R/gb --quick --skip ar_step breakdown verify packed_attn e2e peers \
  --budget-s 125 > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack
grep -E "^step " $R/gb-log.txt | head -6 | cut -c1-200
timeout 100 python3 bench/h200_session.py --out $R/s --stages inflate,compile --builds tree-fr-d10k8b63v16384 \
  --budget-s 95 > $R/s-log.txt 2>&1; echo "build rc=$? at ${SECONDS}s"
[ -d /tmp/zoo8b/build-tree-fr-d10k8b63v16384 ] && timeout 60 python3 bench/step_profile.py \
  /tmp/zoo8b/build-tree-fr-d10k8b63v16384 --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1
echo "sp at ${SECONDS}s"; pack; grep -h "^  op\|profiled decode" $R/sp-log.txt 2>/dev/null | head -10 | cut -c1-220
