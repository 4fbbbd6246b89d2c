#!/bin/sh
# bench-rm.sh: the cost of the rm wrapper on a delete it lets through.
#
# Builds countersign-agent (the binary installed as rm), links it as rm,
# and has hyperfine time, in one run, `rm one-file` through the wrapper in
# a guarded session (CLAUDECODE=1: a single small file is no risk, so no
# request is made) against the real rm alone, on a freshly created file
# each run. Prints hyperfine's report and
# the difference of the means. The target (BENCHMARKS.md, "## safe-rm"):
# at most 3 ms more than the real rm.
#
# A third command, an empty static Go program, shows the floor any Go
# binary pays to start on this machine.
#
# Usage: scripts/bench-rm.sh [RUNS]      (default 200; needs go, hyperfine)
# On a shared machine, run the measurement at real-time priority (as root)
# so that other work is not measured with it; only hyperfine and what it
# times get the priority, not the build:
#   BENCH_PRIO="chrt -f 50" scripts/bench-rm.sh
set -eu

runs=${1:-200}
repo=$(cd "$(dirname "$0")/.." && pwd)
command -v hyperfine >/dev/null || { echo "bench-rm.sh: needs hyperfine (apt-get install -y hyperfine)" >&2; exit 1; }
real_rm=/bin/rm
[ -x "$real_rm" ] || real_rm=/usr/bin/rm

tmp=$(mktemp -d)
trap '"$real_rm" -rf "$tmp"' EXIT INT TERM
(cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/bin/countersign-agent" ./cmd/countersign-agent)
ln -s countersign-agent "$tmp/bin/rm"
mkdir "$tmp/empty"
printf 'package main\n\nfunc main() {}\n' >"$tmp/empty/main.go"
printf 'module empty\n\ngo 1.21\n' >"$tmp/empty/go.mod"
(cd "$tmp/empty" && CGO_ENABLED=0 go build -o "$tmp/bin/go-empty" .)
mkdir "$tmp/home" "$tmp/work"
cd "$tmp/work"

# Both commands see the same environment: a guarded session (the marker is
# meaningless to the real rm), an empty home (no config file), no server.
# shellcheck disable=SC2086 # BENCH_PRIO is a command prefix: split it
env -i PATH=/usr/bin:/bin HOME="$tmp/home" CLAUDECODE=1 \
	${BENCH_PRIO:-} hyperfine -N --warmup 20 --runs "$runs" --prepare 'touch one-file' \
	--export-csv "$tmp/result.csv" \
	-n wrapper "$tmp/bin/rm one-file" \
	-n real-rm "$real_rm one-file" \
	-n go-empty "$tmp/bin/go-empty"

# command,mean,stddev,median,user,system,min,max (seconds)
awk -F, 'NR > 1 { mean[$1] = $2 * 1000; sd[$1] = $3 * 1000 }
END {
	printf "\nwrapper   %.2f ± %.2f ms\nreal rm   %.2f ± %.2f ms\ngo-empty  %.2f ± %.2f ms\n", mean["wrapper"], sd["wrapper"], mean["real-rm"], sd["real-rm"], mean["go-empty"], sd["go-empty"]
	printf "difference of the means, wrapper - real rm: %.2f ms (target: at most 3 ms)\n", mean["wrapper"] - mean["real-rm"]
}' "$tmp/result.csv"
# Page faults dominate process start on some VMs: count them once each.
for c in wrapper:"$tmp/bin/rm" real-rm:"$real_rm" go-empty:"$tmp/bin/go-empty"; do
	touch one-file
	f=$(env -i PATH=/usr/bin:/bin HOME="$tmp/home" CLAUDECODE=1 /usr/bin/time -f %R "${c#*:}" one-file 2>&1 >/dev/null | tail -1)
	echo "minor page faults, ${c%%:*}: $f"
done
echo "nproc $(nproc), $(go version), $(hyperfine --version), load average $(cut -d' ' -f1-3 /proc/loadavg)"
