# Session 31's second call: call.sh's split-rule probes alone (the first call's failed on an import path).
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session31/probe.sh
R=/tmp/c31p; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/probe.tgz --exclude="trace-*" . ; }
eval "$(sed -n '/^probe() {/,/^}/p' bench/results/gpu-2026-12-07-session31/call.sh)"
probe rule 4 528
probe min2 2 528
probe min2t2 2 1056
probe rule2 4 528
