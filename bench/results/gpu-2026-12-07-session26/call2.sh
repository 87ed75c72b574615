# Session 26's call sized to the last 254 s of device time (call1.sh did not get a machine), about 100 s. Run after
# session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session26/call2.sh
# The skinny GEMM's tiling at 65 rows (a 64-node tree's verify) for the 8B's gate+up and down projections, most of a
# verify's bytes: BF12 timed, bf16 bits checked, cuBLAS for scale (gemm_tune.py); then --apply shows the GEMM_TILES
# entries it would commit.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c2; rm -rf $R; mkdir -p $R
timeout 95 python3 bench/gemm_tune.py --out $R/gemm_tune.json --shapes gate+up,down --budget-s 75 > $R/gt-log.txt 2>&1
echo "gemm_tune rc=$? at ${SECONDS}s"; cp $R/gemm_tune.json $R/gt-log.txt $OUT/ 2>/dev/null; tail -n 5 $R/gt-log.txt | cut -c1-250
python3 bench/gemm_tune.py --apply $R/gemm_tune.json 2>&1 | tail -n 4 | cut -c1-250
