#!/bin/sh
# run_all.sh BUILD DATA OUT: every figure of docs/registry.md "Placement at cluster scale", with
# the exact commands (one core; about half an hour on the 2-vCPU VM).
set -eu
bin=$1/bin/placement_sim
data=$2
out=$3
mkdir -p "$out"
# Experiment 1 (FGD's): 10 seeds, every policy, on the three traces.
"$bin" --data "$data" --experiment fgd --seeds 10 \
  --policies random,first-fit,best-fit,dot-product,fgd,fgd@256,reach,reach@256 \
  --json "$out/fgd.json" --table "$out/fgd.md" --png "$out/fgd.png" 2>"$out/fgd.log"
# The same on ten seeds never looked at while designing reach.
"$bin" --data "$data" --experiment fgd --seeds 10 --first-seed 101 \
  --policies best-fit,fgd,fgd@256,reach \
  --json "$out/fgd-heldout.json" --table "$out/fgd-heldout.md" 2>"$out/fgd-heldout.log"
# reach's weight between FGD's measure (0) and the pessimistic one (1).
"$bin" --data "$data" --experiment fgd --seeds 10 \
  --policies reach:0.25,reach:0.75,reach:1 \
  --json "$out/fgd-weights.json" --table "$out/fgd-weights.md" 2>"$out/fgd-weights.log"
# Experiment 2 (queueing): a tenth of the nodes, arrivals compressed to 90% offered GPU load.
"$bin" --data "$data" --experiment queueing --node-fraction 0.1 --offered-load 0.9 \
  --policies random,first-fit,best-fit,dot-product,fgd,reach --disciplines fcfs,sjf,backfill \
  --json "$out/queueing.json" --table "$out/queueing.md" --tsv "$out/queueing.png.tsv" \
  2>"$out/queueing.log"
"$(dirname "$0")/plot.sh" "$out/queueing.png.tsv" "$out/queueing.png" \
  fcfs+best-fit,sjf+best-fit,backfill+best-fit,backfill+fgd,backfill+reach
for load in 0.7 1.1; do
  "$bin" --data "$data" --experiment queueing --node-fraction 0.1 --offered-load $load \
    --policies best-fit,fgd,reach --disciplines fcfs,sjf,backfill \
    --json "$out/queueing-$load.json" --table "$out/queueing-$load.md" 2>"$out/queueing-$load.log"
done
# The registry's queue on declared durations: exact (an oracle) and off by up to 2x (seeded).
for load in 0.7 0.9 1.1; do
  "$bin" --data "$data" --experiment queueing --node-fraction 0.1 --offered-load $load \
    --policies best-fit,reach --disciplines fcfs,backfill,backfill-exact,backfill-noisy \
    --json "$out/queueing-declared-$load.json" --table "$out/queueing-declared-$load.md" \
    2>"$out/queueing-declared-$load.log"
done
# Every declaration an overestimate (what tenants declare when the lease ends at it).
"$bin" --data "$data" --experiment queueing --node-fraction 0.1 --offered-load 0.9 \
  --policies best-fit,reach --disciplines fcfs,backfill,backfill-noisy --declared-low 1 \
  --declared-high 2 --json "$out/queueing-declared-over.json" \
  --table "$out/queueing-declared-over.md" 2>"$out/queueing-declared-over.log"
for seed in 2 3; do
  "$bin" --data "$data" --experiment queueing --node-fraction 0.1 --offered-load 0.9 \
    --policies best-fit,reach --disciplines fcfs,backfill-noisy --first-seed $seed \
    --json "$out/queueing-declared-seed$seed.json" --table "$out/queueing-declared-seed$seed.md" \
    2>"$out/queueing-declared-seed$seed.log"
done
