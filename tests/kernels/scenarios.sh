#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# The kernel matrix's scenarios, run as root inside a qemu guest (busybox sh)
# or on the running kernel (dash): each line of PLAN is one hybtrace run whose
# output, workload log and dumps are kept under OUT/NAME for the host-side
# checks (tests/kernels/checks.py). Nothing is judged here.
#
# usage: scenarios.sh PLAN HT_DIR OUT_DIR
#   HT_DIR holds hybtrace and workloads/; $HT_SEND, when set, is the program that
#   ships OUT/NAME to the host.
#
# PLAN lines: NAME PARANOID MODE ARGS...  (ARGS are expanded by the shell: $W is
# the workloads directory, $D the scenario's directory, $D/dumps its --output)
#   run        ARGS are hybtrace's (`run ... -- CMD`), after NAME=VALUE words for its
#              environment
#   run-ready  the same; CMD is held at each "ready" line it logs until hybtrace
#              armed a trigger at every address the line names ($HT_START_FILE:
#              tests/workloads/trigger_target.c)
#   pid        ARGS are `TARGET ARGV... :: HYBTRACE ARGS`: hybtrace --pid on the
#              running target; $HT_STOP_FILE appears once hybtrace attached
#   pid-ready  the same, the target held at its "ready" lines as in run-ready, the
#              first one until hybtrace attached too
#   pid-armed  the same, but $HT_STOP_FILE appears 5 calls after hybtrace said a
#              trigger is armed, before it attached
# HYBTRACE ARGS (after the NAME=VALUE words in run modes) may begin with
# `$W/without_caps [--probe-only] CAPS`: hybtrace runs without those capabilities
# (or with them, once the wrapper tried what the kernel allows without them).
set -u
plan=$1
HT=$2
OUT=$3
W=$HT/workloads
BIN=$HT/hybtrace
LIMIT_S=${HT_SCENARIO_LIMIT_S:-120}
# How long a workload waits for its triggers to be armed (answer_ready).
READY_LIMIT_S=30

paranoid_file=/proc/sys/kernel/perf_event_paranoid
paranoid_boot=$(cat $paranoid_file)
trap 'echo "$paranoid_boot" > $paranoid_file' EXIT

uptime_s() {
	cut -d' ' -f1 /proc/uptime
}

# Ship OUT/NAME to the host as one framed gzip'd tar (guest only).
send() {
	[ -n "${HT_SEND:-}" ] || return 0
	tar -czf /tmp/send.tgz -C "$OUT" "$1"
	{
		printf '\n@@HTDATA %s %s\n' "$1" "$(wc -c < /tmp/send.tgz)"
		cat /tmp/send.tgz
	} | "$HT_SEND"
	rm -f /tmp/send.tgz
}

# Wait until hybtrace ($1) wrote a line matching $3 into $2, or exited.
wait_for() {
	i=0
	while [ $i -lt $((LIMIT_S * 20)) ]; do
		grep -q "$3" "$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# Answer the "ready" lines of the workload log ($3) while hybtrace ($1) runs: once
# its stderr ($2) says a trigger is armed at every address one names, make the
# file the workload waits for ($4), again for the next line (the image after an
# exec waits anew). A trigger never armed is the check's to report: after
# READY_LIMIT_S the workload goes on anyway, and the scenario ends.
answer_ready() {
	answered=0
	since=$(date +%s)
	while kill -0 "$1" 2>/dev/null; do
		# A line is whole once it ends its "at" object.
		line=$(grep '"event":"ready".*}}$' "$3" 2>/dev/null | sed -n "$((answered + 1))p")
		if [ -n "$line" ]; then
			armed=1
			for a in $(echo "$line" | grep -o '"0x[0-9a-f]*"' | tr -d '"'); do
				grep -q " at $a in .* armed\$" "$2" || armed=0
			done
			if [ $(($(date +%s) - since)) -ge $READY_LIMIT_S ]; then
				echo "@@ $name: no trigger armed at $line after $READY_LIMIT_S s"
				armed=1
			fi
			if [ $armed = 1 ]; then
				touch "$4"
				answered=$((answered + 1))
				since=$(date +%s)
				continue
			fi
		fi
		sleep 0.05
	done
}

run_pid_mode() {
	mode=$1
	shift
	target=
	while [ $# -gt 0 ] && [ "$1" != "::" ]; do
		target="$target $1"
		shift
	done
	shift
	wrap=
	if [ "${1:-}" = "$W/without_caps" ]; then
		wrap=$1
		shift
		[ "$1" = --probe-only ] && wrap="$wrap $1" && shift
		wrap="$wrap $1"
		shift
	fi
	gate=$D/start
	case $mode in
	pid-ready)
		HT_START_FILE=$gate HT_WORKLOAD_LOG=$D/workload.log $target &
		;;
	pid-armed)
		HT_STOP_FILE=$D/armed HT_WORKLOAD_LOG=$D/workload.log $target &
		;;
	*)
		HT_STOP_FILE=$gate HT_WORKLOAD_LOG=$D/workload.log $target &
		;;
	esac
	tpid=$!
	HT_WORKLOAD_LOG=$D/workload.log timeout "$LIMIT_S" $wrap "$BIN" --pid "$tpid" "$@" \
		> "$D/stdout" 2> "$D/stderr" &
	hpid=$!
	if [ "$mode" = pid-ready ]; then
		# What the target does next (exec, dlopen) comes after the attach.
		wait_for "$hpid" "$D/stdout" '"type":"attached"'
		answer_ready "$hpid" "$D/stderr" "$D/workload.log" "$gate"
	elif [ "$mode" = pid-armed ]; then
		# The target makes 5 more calls with the triggers armed, then exits.
		wait_for "$hpid" "$D/stderr" ' armed$'
		calls=$(grep -c '"event":"call"' "$D/workload.log")
		i=0
		while [ "$(grep -c '"event":"call"' "$D/workload.log")" -lt $((calls + 5)) ] &&
			[ $i -lt $((LIMIT_S * 20)) ]; do
			sleep 0.05
			i=$((i + 1))
		done
		touch "$D/armed"
	fi
	wait_for "$hpid" "$D/stdout" '"type":"attached"'
	touch "$gate"
	wait "$hpid"
	echo $? > "$D/rc"
	kill "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null
}

mkdir -p "$OUT/_info"
{
	echo "release $(uname -r)"
	echo "version $(uname -v)"
	echo "paranoid_boot $paranoid_boot"
	echo "realtime $(cat /sys/kernel/realtime 2>/dev/null || echo 0)"
	echo "cpus $(nproc)"
	echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
	echo "btf $([ -r /sys/kernel/btf/vmlinux ] && echo yes || echo no)"
} > "$OUT/_info/info"
"$BIN" check > "$OUT/_info/check" 2>&1
send _info

while read -r name paranoid mode rest <&3; do
	case $name in
	'' | '#'*) continue ;;
	esac
	D=$OUT/$name
	rm -rf "$D"
	mkdir -p "$D/dumps"
	echo "$paranoid" > $paranoid_file
	echo "@@ $name (paranoid $paranoid) at $(uptime_s) s"
	t0=$(uptime_s)
	eval "set -- $rest"
	case $mode in
	run | run-ready)
		# NAME=VALUE words before hybtrace's arguments go into its environment.
		envs=
		while [ $# -gt 0 ] && case $1 in [A-Z_]*=*) true ;; *) false ;; esac; do
			envs="$envs $1"
			shift
		done
		wrap=
		if [ "${1:-}" = "$W/without_caps" ]; then
			wrap=$1
			shift
			[ "$1" = --probe-only ] && wrap="$wrap $1" && shift
			wrap="$wrap $1"
			shift
		fi
		if [ "$mode" = run ]; then
			HT_WORKLOAD_LOG=$D/workload.log timeout "$LIMIT_S" env $envs $wrap "$BIN" \
				"$@" > "$D/stdout" 2> "$D/stderr" < /dev/null
			echo $? > "$D/rc"
		else
			HT_START_FILE=$D/start HT_WORKLOAD_LOG=$D/workload.log timeout "$LIMIT_S" \
				env $envs $wrap "$BIN" "$@" > "$D/stdout" 2> "$D/stderr" < /dev/null &
			hpid=$!
			answer_ready "$hpid" "$D/stderr" "$D/workload.log" "$D/start"
			wait "$hpid"
			echo $? > "$D/rc"
		fi
		;;
	pid | pid-ready | pid-armed)
		run_pid_mode "$mode" "$@"
		;;
	esac
	echo "$t0 $(uptime_s)" > "$D/uptime"
	# report reads each dump on this kernel too; the host reads them again as JSON.
	for f in "$D"/dumps/*.perfetto-trace; do
		[ -e "$f" ] || continue
		"$BIN" report "$f" > "$f.report" 2>&1 < /dev/null
		echo $? > "$f.report-rc"
	done
	echo "$paranoid_boot" > $paranoid_file
	send "$name"
done 3< "$plan"

# The guest's kernel log, for warnings the runs caused (a host's log is its own).
if [ -n "${HT_SEND:-}" ]; then
	mkdir -p "$OUT/_dmesg"
	dmesg > "$OUT/_dmesg/dmesg" 2>&1
	send _dmesg
	printf '\n@@HTDONE\n' | "$HT_SEND"
fi
exit 0
