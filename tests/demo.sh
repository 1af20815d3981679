#!/usr/bin/env bash
# `make demo`: hybtrace on the bundled demo service, whose worker thread
# waits in the run queue behind a batch job on its CPU. Prints the live
# breaches, writes dumps into demo-output/, and reviews the worst one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "make demo needs root for BPF: run sudo make demo" >&2
	exit 2
fi
out=demo-output
rm -rf "$out"
mkdir -p "$out"
echo "== hybtrace run --rq-delay 1ms --output $out -- demo_service"
echo "   (a worker thread handles a request every 2 ms; a batch job takes its CPU)"
echo
build/hybtrace run --rq-delay 1ms --max-dumps 3 --output "$out" --quiet --no-children \
	-- build/workloads/demo_service 2 | awk '
	/^[0-9.]+ rq-delay/ && n < 8 { print; n++; next }
	/^[0-9.]+ rq-delay/ { more++; next }
	{ if (more) { printf "... and %d more breaches\n", more; more = 0 } print }'
echo
echo "== hybtrace report $out"
build/hybtrace report "$out"
worst=$(build/hybtrace report --json "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["file"])')
echo
echo "== hybtrace report $worst"
# sed reads to the end, unlike head: the report never writes into a closed
# pipe (SIGPIPE, which pipefail would turn into a failed demo).
build/hybtrace report "$worst" | sed -n '1,60p'
echo
echo "Open $worst in https://ui.perfetto.dev to see the same timeline."
