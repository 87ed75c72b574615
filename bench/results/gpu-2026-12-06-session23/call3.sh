# session 23 call 3 (issue 17: the rope + KV write in the q|k|v GEMV's epilogue), sized for the ~200 s of device time
# left. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session23/call3.sh
# 1. the epilogue's kernel tests compiled on the GPU (the 8B head shape among them: bits against the linear then
# rope_kv_write); 2. the 8B zoo pair built with every opt-in fusion (tree-fr-all), its step profile with the stock AR
# and the AR as built. Each result goes to $OUT as it comes (the call may be cut short).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_rope_kv.py > $OUT/gpu-tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -n 2 $OUT/gpu-tests.txt | cut -c1-300
timeout 75 python3 bench/h200_session.py --out /tmp/s --stages inflate,compile --builds tree-fr-all --budget-s 72 \
  > $OUT/s-log.txt 2>&1; echo "build rc=$? at ${SECONDS}s"
timeout 70 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-all --ar --ar-as-built --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/sp8-log.txt 2>&1; echo "sp rc=$? at ${SECONDS}s"
cp /tmp/sp8/profile.json $OUT/sp8-profile.json 2>/dev/null
grep -h "generate 1" $OUT/sp8-log.txt 2>/dev/null | cut -c1-230 | head -4
