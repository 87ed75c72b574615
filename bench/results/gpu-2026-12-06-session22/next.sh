# The next GPU session's first call (issue 17). Session 22's call 2 timed norm_linear before fd06e72 (its cuBLAS-routed
# forwards then split each add + norm into two launches) and could not time its AR effect (`specir bench`'s AR
# baseline is the stock target). This call: the new kernel tests on the GPU with time to compile them all, the 8B zoo
# pair's tree-fr against tree-fr-nl through `specir bench --check` at b1, then the step profile of tree-fr-nl with
# the stock AR and the AR as built (`--ar-as-built`: the norms in the GEMVs' prologues, the adds in their epilogues).
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session22/next.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p $OUT/all
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_norm_residual.py tests/triton/test_triton_norm.py \
  tests/triton_backend/test_norm_linear.py > $OUT/all/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/all/gpu-tests.txt | cut -c1-300
timeout 235 python3 bench/h200_session.py --out $OUT/all/s --stages inflate,compile,bench --builds tree-fr,tree-fr-nl --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 75 --budget-s 230 > $OUT/all/s-log.txt 2>&1; echo "8b rc=$?"
timeout 140 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-nl --ar --ar-as-built --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/all/sp8-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp8/profile.json $OUT/all/sp8-profile.json 2>/dev/null
tar -C $OUT -czf $OUT/next.tgz all
grep -A3 "^build " $OUT/all/s-log.txt | head -5
grep -h "generate 1\|segment\|_rms_norm\|gemv_kernel\|add_kernel" $OUT/all/sp8-log.txt | cut -c1-200 | head -30
rm -rf $OUT/all
