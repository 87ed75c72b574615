# session 22 call 2 (issue 17; ran at c632d31 on an H100, results in call2/ and README.md): call 1's 8B figures ran a norm kernel whose reshape/split tree spilled (AR 154.7 ->
# 83.8 tok/s); fixed in 3f37c5b. On the GPU: the new kernel tests (the norm's fixed-order sum, the linear kernels'
# RMSNorm prologue and residual epilogue bit for bit against the separate launches, the norm_linear fusion's forwards),
# then the 8B zoo pair's tree-fr (default fusions) against tree-fr-nl (fusion{norm_linear=true,swiglu_linear=true}),
# each with its own AR baseline, through `specir bench --check` at b1, and the step profile of both (with the
# AR decode of tree-fr-nl's target: `--ar`).
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-06-session22/call2.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p $OUT/all
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/triton/test_linear_norm_residual.py tests/triton/test_triton_norm.py \
  tests/triton_backend/test_norm_linear.py > $OUT/all/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 3 $OUT/all/gpu-tests.txt | cut -c1-300
timeout 235 python3 bench/h200_session.py --out $OUT/all/s --stages inflate,compile,bench --builds tree-fr,tree-fr-nl --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 75 --budget-s 230 > $OUT/all/s-log.txt 2>&1; echo "8b rc=$?"
timeout 110 python3 bench/step_profile.py /tmp/zoo8b/build-tree-fr-nl /tmp/zoo8b/build-tree-fr --ar --batch-size 1 --limit 1 \
  --max-new-tokens 32 --out /tmp/sp8 > $OUT/all/sp8-log.txt 2>&1; echo "sp rc=$?"
cp /tmp/sp8/profile.json $OUT/all/sp8-profile.json 2>/dev/null
tar -C $OUT -czf $OUT/call2.tgz all
grep -A3 "^build " $OUT/all/s-log.txt | head -5
grep -h "generate 1\|segment\|_rms_norm\|gemv_kernel\|launches" $OUT/all/sp8-log.txt | cut -c1-200 | head -30
rm -rf $OUT/all
