#!/usr/bin/env bash
# scripts/demo-stop.sh - `make demo-stop`: unmounts build/demo/mnt and makes
# sure its daemon (found by its build/demo/demo.conf command line, never by
# name alone) has exited. Does nothing when the demo is not running.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
demo=$repo/build/demo
mnt=$demo/mnt
conf=$demo/demo.conf

daemon_pids() {
	local p
	for p in /proc/[0-9]*; do
		tr '\0' '\n' 2>/dev/null <"$p/cmdline" | grep -qxF "$conf" &&
			echo "${p#/proc/}"
	done
	return 0
}

pids=$(daemon_pids)
if grep -qs " $mnt " /proc/mounts; then
	if fusermount3 -u "$mnt" 2>/dev/null; then
		echo "unmounted $mnt"
	else
		echo "demo-stop: $mnt is busy; detaching it (umount -l)" >&2
		umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	fi
else
	echo "demo-stop: $mnt is not mounted"
fi

for pid in $pids; do
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "demo-stop: daemon $pid still running; terminating it" >&2
		kill -TERM "$pid" 2>/dev/null
		sleep 1
		kill -KILL "$pid" 2>/dev/null
	fi
done
[ -z "$pids" ] || echo "daemon stopped"
! grep -qs " $mnt " /proc/mounts
