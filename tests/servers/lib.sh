# shellcheck shell=sh
# tests/servers/lib.sh - helpers shared by the test-server scripts (sourced).
#
# Every server a script starts is recorded in DIR/pids (one pid a line) and
# logs into DIR/log/; srv_stop_all kills exactly those pids (TERM, then KILL
# after a bounded wait), so it is safe to call from a trap, twice, or on a
# half-started DIR.

# srv_free_ports N: prints N distinct free TCP ports on 127.0.0.1.
srv_free_ports()
{
	/usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# srv_spawn DIR NAME CMD...: starts CMD in the background, its output in
# DIR/log/NAME.log, and records its pid.
srv_spawn()
{
	_dir=$1
	_name=$2
	shift 2
	mkdir -p "$_dir/log"
	"$@" >"$_dir/log/$_name.log" 2>&1 </dev/null &
	echo "$!" >>"$_dir/pids"
	echo "$_name $!" >>"$_dir/pids.names"
}

# srv_wait SECONDS WHAT CMD...: polls CMD (every 0.2 s) until it succeeds;
# fails naming WHAT after SECONDS.
srv_wait()
{
	_limit=$1
	_what=$2
	shift 2
	_end=$(($(date +%s) + _limit))
	while ! "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$_end" ]; then
			echo "$_what: not ready after ${_limit}s" >&2
			return 1
		fi
		sleep 0.2
	done
}

# srv_starting DIR: records the running start script, so that a stop
# during the start (a test that died) ends it before it spawns more.
srv_starting()
{
	echo "$$" >"$1/starter.pid"
}

# srv_started DIR: the start script is done.
srv_started()
{
	rm -f "$1/starter.pid"
}

# srv_stop_all DIR: ends a start script still running, kills every
# recorded pid, waits (bounded) for them.
srv_stop_all()
{
	_dir=$1
	if [ -f "$_dir/starter.pid" ]; then
		_s=$(cat "$_dir/starter.pid")
		if [ "$_s" != "$$" ]; then
			kill -TERM "$_s" 2>/dev/null || true
		fi
		rm -f "$_dir/starter.pid"
	fi
	[ -f "$_dir/pids" ] || return 0
	_pids=$(cat "$_dir/pids")
	for _p in $_pids; do
		kill -TERM "$_p" 2>/dev/null || true
	done
	_end=$(($(date +%s) + 10))
	for _p in $_pids; do
		while kill -0 "$_p" 2>/dev/null; do
			if [ "$(date +%s)" -ge "$_end" ]; then
				kill -KILL "$_p" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
	done
	rm -f "$_dir/pids" "$_dir/pids.names"
}

# srv_dump_logs DIR: prints the tail of every log (after a failed start).
srv_dump_logs()
{
	for _f in "$1"/log/*.log; do
		[ -f "$_f" ] || continue
		echo "---- $_f" >&2
		tail -n 30 "$_f" >&2
	done
}
