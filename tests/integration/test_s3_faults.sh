#!/usr/bin/env bash
# test_s3_faults.sh [SCENARIO] - issue 10's fault runs through a mount with
# an s3 backend (an s3rver this test starts on loopback) and an http
# (WebDAV) backend (an nginx with the dav-ext module, likewise).
# SCENARIO (run.sh runs each as its own test; without one, all three run):
#   stop  a `mirror` mount of s3 + http. A copy loop like the programs'
#         (cp -r, tar x, cat, rm) runs; after its first round the s3rver is
#         killed (SIGKILL: connections reset mid-request) and, 10 s later,
#         started again on the SAME port with the same data directory,
#         while the rounds go on, an 11 MiB multipart copy starts with the
#         fault and a file is held open for writing across it. No
#         operation may fail. Afterwards the pending hints drain to 0
#         (`.smux/ctl repair` forces the replay) and the bucket (read with
#         tests/tools/s3_fetch.py) and the WebDAV tree (nginx's root) hold
#         exactly the files the rounds left, byte for byte.
#   freeze the same with s3rver stopped by SIGSTOP for 8 s (connections
#         accepted by the kernel, nothing answered; answered late after
#         SIGCONT), backend_timeout 5 s.
#   hung  a `failover` mount whose first member is an s3 backend on a
#         server that accepts TCP connections and never answers
#         (tests/servers/silent_server.py) and whose second is the WebDAV
#         backend, backend_timeout 2 s: writes, reads, stat, ls, mkdir,
#         rename and rm through the mount succeed, each well within a
#         bound (a hang detector, not a timing assertion: every command
#         runs under `timeout`); .smux/stats shows the stuck member down
#         with timeouts counted, .smux/metrics shows it down. Then the
#         same with a short cooldown (the background probes hang on the
#         server while the operations run), and with a `mirror` of the
#         two: writes succeed on the working replica (quorum 1) and hints
#         are kept for the stuck one.
. "$(dirname "$0")/lib.sh"

SCEN=${1:-all}
# Debian's python3 (with python3-botocore), as tests/servers/ uses: a
# python3 found first on PATH may be a version manager's shim that takes
# seconds to start on a loaded machine
PY=/usr/bin/python3
[ -x "$PY" ] || fail "$PY missing (scripts/install-deps.sh)"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
	fail "nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them)"
fi

# ---- s3rver (stop, freeze), started in the background while nginx starts.
# Outside $T: the harness deletes $T at exit, before a stopper could read
# the pids in it; the background stopper ends it when this shell ends,
# however it ends.
s3_start() {
	S3D=$(mktemp -d /tmp/smux-s3f.XXXXXX)
	(tail --pid=$$ -f /dev/null 2>/dev/null
		"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1
		rm -rf "$S3D") &
	"$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null &
	S3START=$!
}
case $SCEN in stop | freeze | all) s3_start ;; esac

# ---- nginx WebDAV, in the foreground, everything under $T/ng (its command
# line names $T, so the harness's cleanup stops it even when this fails) ----
NG=$T/ng
mkdir -p "$NG/root"
NGPORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s#@DIR@#$NG#g; s#@ROOT@#$NG/root#g; s#@PORT@#$NGPORT#g" \
	-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
	"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$NG/nginx.conf"
"$NGINX" -e "$NG/server.log" -p "$NG" -c "$NG/nginx.conf" >"$NG/server.log" 2>&1 &
NGPID=$!
for ((i = 0; i < 200; i++)); do
	curl -s -o /dev/null "http://127.0.0.1:$NGPORT/" && break
	kill -0 "$NGPID" 2>/dev/null || { cat "$NG/server.log" >&2; fail "nginx exited"; }
	sleep 0.1
done
DAV=http://127.0.0.1:$NGPORT
log "nginx on $DAV (pid $NGPID)"

export S3F_ACCESS_KEY_ID=S3RVER S3F_SECRET_ACCESS_KEY=S3RVER

# round_in M WANT: one round of the programs on mount M: cp -r, tar x,
# diff, cat of every file, a note written and read back, rm -r of the
# untarred tree; every command must succeed (set -e). WANT gets what the
# round leaves behind, for the comparison at the end.
ROUND=0
round_in() {
	local m=$1 want=$2 d
	d=$m/r$ROUND
	mkdir "$d"
	cp -r "$S" "$d/copy"
	mkdir "$d/untar"
	tar xf "$T/t.tar" -C "$d/untar"
	diff -r "$S" "$d/copy"
	find "$d/untar" -type f -exec cat {} + >/dev/null
	diff -r "$S" "$d/untar"
	echo "round $ROUND" >"$d/note"
	[ "$(cat "$d/note")" = "round $ROUND" ]
	rm -r "$d/untar"
	# a read of what the first round wrote (before any outage)
	[ "$ROUND" -eq 0 ] || diff -r "$S" "$m/r0/copy"
	mkdir -p "$want/r$ROUND"
	cp -r "$S" "$want/r$ROUND/copy"
	echo "round $ROUND" >"$want/r$ROUND/note"
	ROUND=$((ROUND + 1))
}

S=$T/src
make_tree "$S" 1 2
(cd "$S" && tar cf "$T/t.tar" .)

# ---------------------------------------------------------------------------
# scenario_outage KIND: the mirror run; KIND stop (s3rver killed, started
# again on its port after 10 s) or freeze (s3rver stopped with SIGSTOP for
# 8 s: the kernel still accepts connections, nothing answers; then
# SIGCONT, and what it had queued is answered late).
scenario_outage() {
	local kind=$1 EP PORT B pid0 t0 n h end rel
	wait "$S3START" || fail "s3rver did not start"
	EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
	PORT=${EP##*:}
	B=smux-faults
	curl -sf -X PUT "$EP/$B" >/dev/null || fail "cannot create bucket $B"
	log "s3rver on $EP"

	new_config "$T/$kind.conf" m
	# max_cooldown 2 s: the s3 member back from its outage is probed (and
	# its hints replayed) within 2 s rather than the default's 60 s;
	# backend_timeout 5 s: the deadline a frozen s3rver's calls meet
	cfg_mux m mirror "s d" backend_timeout=5s max_cooldown=2s
	cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3F
part_size = 5M
multipart_threshold = 5M

[backend d]
type = http
url = $DAV/
"
	local M=$T/m$kind W=$T/want-$kind
	mount_smux "$T/$kind.conf" "$M"
	head -c $((11 * 1024 * 1024)) /dev/urandom >"$T/big"
	mkdir -p "$W"
	round_in "$M" "$W"
	log "round 0 clean"

	# a file held open for writing across the fault by a background
	# writer: a 256 KiB chunk every 0.5 s (pacing, not synchronisation)
	# until the fault is over and 4 chunks were written (at most 80),
	# then the close; it records how many chunks it wrote. Not in this
	# shell: an open file here would keep the harness from unmounting
	# after a failure.
	(
		exec 7>"$M/held"
		for ((i = 0; i < 80; i++)); do
			dd if="$T/big" bs=262144 skip=$i count=1 status=none >&7 || exit 1
			echo $((i + 1)) >"$T/held.n"
			[ -e "$T/s3-up" ] && [ "$i" -ge 3 ] && break
			[ -e "$T/s3-failed" ] && exit 1
			sleep 0.5
		done
		exec 7>&-
	) &
	local held=$!

	# the fault, from a background shell so the rounds never wait for it
	pid0=$(head -n 1 "$S3D/pids")
	if [ "$kind" = stop ]; then
		# SIGKILL (connections reset mid-request), 10 s without it,
		# then a start on the same port and data
		(
			kill -KILL "$pid0"
			"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1
			sleep 10 # the outage's length, not a synchronisation
			if S3RVER_PORT=$PORT "$SMUX_REPO/tests/servers/s3rver.sh" \
				start "$S3D" >"$T/s3-restart.log" 2>&1; then
				: >"$T/s3-up"
			else
				: >"$T/s3-failed"
			fi
		) &
	else
		(
			kill -STOP "$pid0"
			sleep 8 # the freeze's length, not a synchronisation
			if kill -CONT "$pid0"; then : >"$T/s3-up"; else : >"$T/s3-failed"; fi
		) &
	fi
	local stopper=$!
	t0=$SECONDS
	n=0
	while [ ! -e "$T/s3-up" ] && [ ! -e "$T/s3-failed" ]; do
		if [ "$n" -eq 0 ]; then
			# a multipart upload (3 parts of 5 MiB) as the fault
			# starts (the kill or stop may land during it)
			cp "$T/big" "$M/big"
			cmp "$T/big" "$M/big"
			cp "$T/big" "$W/big"
		fi
		if [ "$n" -lt 6 ]; then
			round_in "$M" "$W"
		else
			# enough written: reads and listings until the end of
			# the fault (fewer hints to replay, a shorter test)
			diff -r "$S" "$M/r1/copy"
			ls -lR "$M/r2" >/dev/null
			cat "$M/r5/note" >/dev/null
			sleep 0.2 # pacing (a loaded machine), not a wait
		fi
		n=$((n + 1))
		[ "$n" -lt 1000 ] || fail "the fault never ended"
	done
	wait "$stopper" || true
	[ -e "$T/s3-up" ] || { cat "$T/s3-restart.log" >&2; fail "s3rver did not come back on port $PORT"; }
	log "$kind: s3rver back on $EP after $((SECONDS - t0)) s; $n rounds ran meanwhile"
	log "s after the fault: $(backend_stat "$M" s status), errors $(backend_stat "$M" s errors), timeouts $(backend_stat "$M" s timeouts), hints $(stats "$M" .pendingHints)"
	# evidence that the operations met the fault (a round can take
	# longer than the fault on a loaded machine: one is enough)
	[ "$n" -ge 1 ] || fail "no round ran during the fault"
	if [ "$kind" = stop ]; then
		[ "$(backend_stat "$M" s errors)" -ge 1 ] || fail "no call met the stopped s3rver"
	else
		[ "$(backend_stat "$M" s timeouts)" -ge 1 ] || fail "no call met the frozen s3rver's deadline"
	fi
	wait "$held" || fail "a write or the close of the file held open across the fault failed"
	head -c $(($(cat "$T/held.n") * 262144)) "$T/big" >"$W/held"
	cmp "$W/held" "$M/held" || fail "the file held open across the fault reads back wrong"
	log "a file held open across the fault: $(cat "$T/held.n") chunks written, closed, reads back"
	round_in "$M" "$W"
	log "a round after the fault, nothing failed"

	# the hints replay; both replicas hold the rounds' files
	end=$((SECONDS + 90))
	while h=$(stats "$M" .pendingHints) && [ "$h" -ne 0 ]; do
		[ "$SECONDS" -lt "$end" ] || fail "pendingHints still $h after 90 s"
		echo repair >"$M/.smux/ctl" 2>/dev/null || true
		sleep 0.5
	done
	log "pending hints replayed (0 left) $((SECONDS - end + 90)) s after the last round"

	(cd "$W" && find . -type f | sort) >"$T/want.list"
	(cd "$M" && find . -path ./.smux -prune -o -type f -print | sort) >"$T/got.mount"
	diff "$T/want.list" "$T/got.mount" || fail "the mount shows another file set"
	(cd "$NG/root" && find . -type f | sort) >"$T/got.dav"
	diff "$T/want.list" "$T/got.dav" || fail "the WebDAV tree holds another file set"
	mkdir "$T/dl-$kind"
	S3_ACCESS_KEY=S3RVER S3_SECRET_KEY=S3RVER timeout 120 \
		"$PY" "$SMUX_REPO/tests/tools/s3_fetch.py" "$EP" "$B" "$T/dl-$kind"
	(cd "$T/dl-$kind" && find . -type f | sort) >"$T/got.s3"
	diff "$T/want.list" "$T/got.s3" || fail "the bucket holds another file set"
	while IFS= read -r rel; do
		cmp "$W/$rel" "$NG/root/$rel"
		cmp "$W/$rel" "$T/dl-$kind/$rel"
	done <"$T/want.list"
	log "the bucket and the WebDAV tree hold the rounds' $(wc -l <"$T/want.list") files byte for byte"
	# what the member's errors were (informational)
	log "daemon warnings by code: $({ grep -h warning "$T"/smuxfs.*.log || true; } |
		{ grep -o 'STORAGE_MUX\.[A-Z_]*' || true; } | sort | uniq -c | tr -s ' \n' ' ')"
	unmount_smux "$M"
	"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null
}

# ---------------------------------------------------------------------------
# timed LIMIT CMD...: runs CMD under `timeout` (a hang fails, never hangs
# the test) and fails it if it took LIMIT seconds or more; logs the time.
timed() {
	local limit=$1 t0 t1 rc=0
	shift
	t0=$(date +%s%N)
	timeout -k 5 60 "$@" >/dev/null || rc=$?
	t1=$(date +%s%N)
	[ "$rc" -eq 0 ] || fail "$* failed (exit $rc) after $(((t1 - t0) / 1000000)) ms"
	[ $(((t1 - t0) / 1000000000)) -lt "$limit" ] ||
		fail "$* took $(((t1 - t0) / 1000000)) ms (bound ${limit}s): a hang"
	TIMES+=("$(printf '%6d ms  %s' $(((t1 - t0) / 1000000)) "$*")")
}

# ops_on M: the operations through a mount with a stuck member, each
# bounded by 3 x backend_timeout + a margin for a loaded machine.
ops_on() {
	local m=$1 lim=$2
	timed "$lim" sh -c "echo hello >'$m/a'"
	timed "$lim" cat "$m/a"
	[ "$(timeout 60 cat "$m/a")" = hello ] || fail "$m/a reads wrong"
	timed "$lim" stat "$m/a"
	timed "$lim" ls -l "$m"
	timed "$lim" mkdir "$m/dir"
	timed "$lim" cp "$S/d0/f0.dat" "$m/dir/f0"
	timed "$lim" cmp "$S/d0/f0.dat" "$m/dir/f0"
	timed "$lim" mv "$m/dir/f0" "$m/dir/g0"
	timed "$lim" cmp "$S/d0/f0.dat" "$m/dir/g0"
	timed "$lim" sh -c "echo more >>'$m/a'"
	timed "$lim" cp -r "$S" "$m/tree"
	timed "$lim" diff -r "$S" "$m/tree"
	timed "$lim" rm -r "$m/tree"
	timed "$lim" ls -lR "$m"
}

# hung_conf CONF MODE DIR MUXKEYS...: a mux of MODE over [stuck, d]: stuck
# an s3 backend on the silent server, d the WebDAV backend on $DAV/DIR/.
hung_conf() {
	local conf=$1 mode=$2 dir=$3
	shift 3
	new_config "$conf" m
	cfg_mux m "$mode" "stuck d" backend_timeout=2s "$@"
	cfg_raw "[backend stuck]
type = s3
endpoint = $SIL
bucket = nowhere
credentials_env = S3F

[backend d]
type = http
url = $DAV/$dir/
"
	mkdir -p "$NG/root/$dir"
}

# hung_unmount M: the unmount is prompt with a stuck member.
hung_unmount() {
	local t0=$SECONDS
	unmount_smux "$1"
	[ $((SECONDS - t0)) -lt 20 ] || fail "unmount took $((SECONDS - t0)) s"
	printf '%s\n' "${TIMES[@]}" >&2
}

scenario_hung() {
	local i st to M lim=8 silpid acc0
	mkdir -p "$T/sil"
	# lifetime 100 s: longer than this scenario, bounded if it dies
	"$PY" "$SMUX_REPO/tests/servers/silent_server.py" "$T/sil/port" 100 \
		>"$T/sil/log" 2>&1 &
	silpid=$!
	for ((i = 0; i < 200; i++)); do
		[ -s "$T/sil/port" ] && break
		sleep 0.05
	done
	[ -s "$T/sil/port" ] || fail "silent_server.py did not start"
	SIL=http://127.0.0.1:$(cat "$T/sil/port")
	log "a server that never answers on $SIL"

	# failover [stuck, d]: 2 s deadline, a long cooldown: the stuck
	# member goes down at its first timeout and stays down
	hung_conf "$T/hung.conf" failover fo cooldown=60s
	M=$T/mhung
	TIMES=()
	mount_smux "$T/hung.conf" "$M"
	ops_on "$M" "$lim"
	st=$(backend_stat "$M" stuck status)
	to=$(backend_stat "$M" stuck timeouts)
	log "failover: stuck is $st, timeouts $to; $(grep -c accepted "$T/sil/log") connections accepted"
	[ "$st" = down ] || fail "the stuck member is $st, not down"
	[ "$to" -ge 1 ] || fail "no timeout counted on the stuck member"
	[ "$(backend_stat "$M" d status)" = up ] || fail "the working member is not up"
	grep -qx 'smux_backend_up{mux="m",path="m",backend="stuck"} 0' "$M/.smux/metrics" ||
		fail ".smux/metrics does not show stuck down"
	hung_unmount "$M"

	# the same with a short cooldown: the mux probes the down member in
	# the background (a health check) each 200 ms; the operations run
	# while such a probe hangs on the silent server and must not wait
	# for it
	hung_conf "$T/probe.conf" failover pr cooldown=200ms max_cooldown=200ms
	M=$T/mprobe
	TIMES=()
	mount_smux "$T/probe.conf" "$M"
	acc0=$(grep -c accepted "$T/sil/log" || true)
	timed "$lim" sh -c "echo hello >'$M/a'"
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -c accepted "$T/sil/log")" -ge $((acc0 + 2)) ] && break
		sleep 0.05
	done
	[ "$(grep -c accepted "$T/sil/log")" -ge $((acc0 + 2)) ] ||
		fail "the down member was never probed"
	timed "$lim" rm "$M/a"
	ops_on "$M" "$lim"
	to=$(backend_stat "$M" stuck timeouts)
	log "failover, probed: stuck timeouts $to, $(($(grep -c accepted "$T/sil/log") - acc0)) connections"
	[ "$(backend_stat "$M" stuck status)" = down ] || fail "the stuck member is up"
	hung_unmount "$M"

	# mirror [stuck, d]: writes succeed on d (quorum 1), hints for stuck
	hung_conf "$T/mhung.conf" mirror mi cooldown=60s write_quorum=1
	M=$T/mmir
	TIMES=()
	mount_smux "$T/mhung.conf" "$M"
	ops_on "$M" "$lim"
	st=$(backend_stat "$M" stuck status)
	log "mirror: stuck is $st, hints $(stats "$M" .pendingHints)"
	[ "$st" = down ] || fail "the stuck replica is $st, not down"
	[ "$(stats "$M" .pendingHints)" -ge 1 ] || fail "no hint kept for the stuck replica"
	[ "$(cat "$NG/root/mi/a")" = "hello
more" ] || fail "the working replica lacks a"
	hung_unmount "$M"
	kill -TERM "$silpid" 2>/dev/null || true
	wait "$silpid" 2>/dev/null || true
}

case $SCEN in
stop | freeze) scenario_outage "$SCEN" ;;
hung) scenario_hung ;;
all)
	scenario_outage stop
	s3_start
	scenario_outage freeze
	scenario_hung
	;;
*) fail "unknown scenario $SCEN" ;;
esac
kill -TERM "$NGPID" 2>/dev/null || true
wait "$NGPID" 2>/dev/null || true
log "passed"
