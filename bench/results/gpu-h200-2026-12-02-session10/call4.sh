# call 4 (call 3 failed: a host read in ragged.pack under capture; the chain bench of call 3 stands): after verify.packed packs on the device (one captured step): the bench of the batch-fusion builds and the chain,
# then the per-segment profile of chain-bf and tree-bf at batch 8
. bench/results/gpu-h200-2026-12-02-session10/setup.sh
timeout 400 python3 bench/h200_session.py --out $OUT/s --stages inflate,compile,bench --builds chain-bf,tree-bf,tree-bf-narrow \
  --batch-sizes 1,8,32,64 --limit 8 --max-new-tokens 96 --budget-s 395 --bench-limit-s 90 > $OUT/s-log.txt 2>&1; echo "session rc=$?"
timeout 130 python3 bench/step_profile.py /tmp/zoo8b/build-chain-bf /tmp/zoo8b/build-tree-bf --batch-size 8,64 --out $OUT/p > $OUT/p-log.txt 2>&1; echo "profile rc=$?"
rm -f $OUT/p/trace-*.json
grep -A18 "^build " $OUT/s-log.txt | head -18; grep -h "generate 1\|segment" $OUT/p-log.txt
