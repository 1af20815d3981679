#!/usr/bin/env bash
# `make demo`: hybtrace on the bundled demo service, whose worker thread
# waits in the run queue behind a batch job on its CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "make demo needs root for BPF: run sudo make demo" >&2
	exit 2
fi
echo "== hybtrace run --rq-delay 1ms -- demo_service"
echo "   (a worker thread handles a request every 2 ms; a batch job takes its CPU)"
echo
build/hybtrace run --rq-delay 1ms --quiet -- build/workloads/demo_service 2 | awk '
	/^[0-9.]+ rq-delay/ && n < 12 { print; n++; next }
	/^[0-9.]+ rq-delay/ { more++; next }
	{ if (more) { printf "... and %d more breaches\n", more; more = 0 } print }'
