# session 23 call 3 (issue 17: the rope + KV write in the q|k|v GEMV's epilogue). Run after session 15's setup, with
# carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session23/call3.sh
# 1. its tests compiled on the GPU (the 8B head shape among them: bits against the linear then rope_kv_write; the
# fusion's forwards); 2. the 8B zoo pair built with every opt-in fusion (tree-fr-all) and the same with BF12 weights
# (tree-bf12-all); the step profile of each with the stock AR and the AR as built (the target with those fusions).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p $OUT/all
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_rope_kv.py tests/triton_backend/test_linear_rope_kv.py \
  > $OUT/all/gpu-tests.txt 2>&1; echo "tests rc=$? at ${SECONDS}s"; tail -n 2 $OUT/all/gpu-tests.txt | cut -c1-300
timeout 120 python3 bench/h200_session.py --out $OUT/all/s --stages inflate,compile --builds tree-fr-all,tree-bf12-all \
  --budget-s 115 > $OUT/all/s-log.txt 2>&1; echo "build rc=$? at ${SECONDS}s"
timeout 80 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-all --ar --ar-as-built --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/all/sp8-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
cp /tmp/sp8/profile.json $OUT/all/sp8-profile.json 2>/dev/null
left=$((400 - SECONDS))
if [ $left -gt 40 ]; then
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-tree-bf12-all --ar-as-built --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out /tmp/sp12 > $OUT/all/sp12-log.txt 2>&1; echo "sp12 rc=$? at ${SECONDS}s"
  cp /tmp/sp12/profile.json $OUT/all/sp12-profile.json 2>/dev/null
fi
tar -C $OUT -czf $OUT/call3.tgz all
grep -h "generate 1" $OUT/all/sp8-log.txt $OUT/all/sp12-log.txt 2>/dev/null | cut -c1-230 | head -8
rm -rf $OUT/all
