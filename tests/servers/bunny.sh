#!/bin/sh
# tests/servers/bunny.sh start|stop DIR - the Bunny Storage emulator
# (bunny_emu.py, python3 stdlib) on 127.0.0.1, for benches and by hand.
#
# start: starts the emulator on a free loopback port with its files in
# DIR/store (pid in DIR/pids, log in DIR/log/bunny.log), waits (bounded)
# until it answers, then prints and writes to DIR/env:
#   BUNNY_ENDPOINT=http://127.0.0.1:PORT BUNNY_ZONE=zone
#   BUNNY_ACCESS_KEY=emu-secret
# Fault knobs: curl -X POST "$BUNNY_ENDPOINT/_emu/set?burst429=20" (see
# the top of bunny_emu.py); counters: curl "$BUNNY_ENDPOINT/_emu/stats".
# stop: kills what start started (also callable from a trap; idempotent).
# Exit status: 0 ok, 1 failure (the log is printed), 2 usage.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -eq 2 ] || {
	echo "usage: $0 start|stop DIR" >&2
	exit 2
}
cmd=$1
dir=$2
case $cmd in
stop)
	srv_stop_all "$dir"
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac

command -v python3 >/dev/null 2>&1 || {
	echo "bunny.sh: python3 missing (scripts/install-deps.sh installs it)" >&2
	exit 1
}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -s "$dir/pids" ]; then
	echo "bunny.sh: $dir is in use (run stop first)" >&2
	exit 1
fi
srv_starting "$dir"
trap 'rc=$?; if [ $rc -ne 0 ]; then srv_dump_logs "$dir"; srv_stop_all "$dir"; fi' EXIT
rm -f "$dir/port"
BUNNY_EMU_DETACHED=1 srv_spawn "$dir" bunny python3 "$here/bunny_emu.py" \
	"$dir/port" "$dir/store" zone emu-secret
srv_wait 30 "bunny emulator" test -s "$dir/port"
endpoint="http://127.0.0.1:$(cat "$dir/port")"
srv_wait 30 "bunny emulator" curl -sf "$endpoint/_emu/stats"
srv_started "$dir"
cat >"$dir/env" <<ENV
BUNNY_ENDPOINT=$endpoint
BUNNY_ZONE=zone
BUNNY_ACCESS_KEY=emu-secret
ENV
cat "$dir/env"
