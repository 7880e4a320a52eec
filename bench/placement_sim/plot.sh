#!/bin/sh
# plot.sh TSV PNG [RUNS]: draws placement_sim's TSV output with gnuplot.
#   fgd curves (columns trace, arrived_pct, one per policy): a panel per trace, unallocated GPU
#   share against arrived load, a line per policy;
#   queueing series (columns trace, run, time_s, allocated_pct, fragmented_pct, waiting): a row
#   of panels per trace (allocated, fragmented, waiting pods over time), a line per run (only the
#   comma-separated RUNS when given).
set -eu
tsv=$1
png=$2
only=${3:-}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed" >&2; exit 1; }
traces=$(awk -F'\t' 'NR > 1 && !seen[$1]++ { printf "%s ", $1 }' "$tsv")
ntraces=$(echo $traces | wc -w)
if head -1 "$tsv" | grep -q '^trace	arrived_pct'; then
  columns=$(head -1 "$tsv" | awk -F'\t' '{ print NF }')
  gnuplot <<GNUPLOT
set terminal pngcairo size $((560 * ntraces)),480 font ",10" noenhanced
set output "$png"
set datafile separator "\t"
set key top right
set grid
set multiplot layout 1,$ntraces
do for [t in "$traces"] {
  set title sprintf("openb %s: unallocated GPUs as pods arrive (never leave)", t)
  set xlabel "arrived load (% of the cluster's GPUs)"
  set ylabel "unallocated GPUs (%)"
  set xrange [70:100]
  set yrange [0:35]
  plot for [i=3:$columns] "$tsv" using 2:(strcol(1) eq t ? column(i) : 1/0) \
       with lines lw 2 title columnheader(i)
}
unset multiplot
GNUPLOT
else
  runs=$(awk -F'\t' -v only=",$only," 'NR > 1 && !seen[$2]++ &&
                (only == ",," || index(only, "," $2 ",")) { printf "%s ", $2 }' "$tsv")
  ends=$(awk -F'\t' 'NR > 1 && $3 > end[$1] { end[$1] = $3 } END { for (t in end) printf "%s=%s ", t, end[t] }' "$tsv")
  gnuplot <<GNUPLOT
set terminal pngcairo size 1680,$((420 * ntraces)) font ",9" noenhanced
set output "$png"
set datafile separator "\t"
set key outside right
set grid
set multiplot layout $ntraces,3
ends = "$ends"
do for [t in "$traces"] {
  end = 0
  do for [e in ends] { if (strstrt(e, t . "=") == 1) { end = real(e[strlen(t) + 2:]) } }
  set xrange [0:end]
  do for [m=4:6] {
    set title sprintf("openb %s: %s", t, m == 4 ? "GPUs allocated (%)" : m == 5 ? \
                      "GPUs fragmented, FGD's measure (%)" : "pods waiting")
    set xlabel "time since the arrival window opened (s, compressed)"
    plot for [r in "$runs"] "$tsv" using 3:(strcol(1) eq t && strcol(2) eq r ? column(m) : 1/0) \
         with lines title r
  }
}
unset multiplot
GNUPLOT
fi
