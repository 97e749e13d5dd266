#!/usr/bin/env bash
# test_ctl.sh - .smux/ctl (issue 11 item 1): operator commands through the
# mount, on a mirror of a file backend and a faulty one:
#   - `drain f` during a running copy loop fails no copy, returns with f
#     out of rotation (status draining) and the events drain.started and
#     drain.completed for f; writes meanwhile are hinted for f; `undrain f`
#     and `repair` make the backing directories identical;
#   - `fault f error_rate=1` makes f miss writes (hints), `fault f off` and
#     `repair` heal it: the backing directories compare equal;
#   - `weight` on a weighted mux: a member at weight 0 takes no more reads;
#   - `remove f` takes it out of the mux (backend.removed); `add f` puts it
#     back (backend.added) and it takes writes again; `add c to m` adds a
#     section written into the config file after the mount; a name in use
#     (EEXIST), an unknown one (ENOENT) and a bad section (EINVAL, naming
#     the file and line) are refused and change nothing;
#   - reload (and SIGHUP) applies an edited config while a copy loop runs
#     (no copy fails): a member added, one removed, a faulty backend's
#     faults; a mode change or a file that does not parse is refused with
#     the reason (file and line) and changes nothing;
#   - smuxctl (build/smuxctl) finds the mount from a directory inside it:
#     status shows the members and their states, drain/undrain work, exit
#     codes 1 (refused), 2 (usage), 3 (no mount), stats --json, metrics,
#     events -f follows new lines;
#   - a malformed command (EINVAL), an unknown name (ENOENT), a command not
#     built yet (EOPNOTSUPP) and a write by another user (EACCES) fail with
#     their errno, change nothing, and each refused command is a
#     smuxfs.ctl line in .smux/events with its reason.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
new_config "$T/ctl.conf" m
cfg_mux m mirror "a f" backend_timeout=5s cooldown=200ms
cfg_file a "$T/a"
cfg_faulty f b
cfg_file b "$T/b"
mount_smux "$T/ctl.conf" "$M"
CTL=$M/.smux/ctl
status_of() { jq -r ".backends[] | select(.name == \"$1\") | .status" "$M/.smux/stats"; }
# same_dirs: the two backing directories hold the same user files
same_dirs() { diff -r -x .smuxfs-tmp "$T/a" "$T/b" >/dev/null; }
# repair_until_same: repair (f may still be cooling down) until identical
repair_until_same() {
	local i
	for ((i = 0; i < 100; i++)); do
		echo repair >"$CTL"
		[ "$(stats "$M" .pendingHints)" -eq 0 ] && same_dirs && return 0
		sleep 0.1
	done
	diff -r -x .smuxfs-tmp "$T/a" "$T/b" | head >&2 || true
	fail "repair did not make the backing directories identical (pendingHints $(stats "$M" .pendingHints))"
}

log "--- drain during a copy loop"
mkdir "$M/src"
head -c 300000 /dev/urandom >"$T/blob"
(
	for ((i = 0; i < 60; i++)); do
		cp "$T/blob" "$M/src/c$i" || exit 1
	done
) &
cpid=$!
sleep 0.3
echo "drain f" >"$CTL" || fail "drain f failed"
[ "$(status_of f)" = draining ] || fail "f is $(status_of f) after drain, not draining"
wait "$cpid" || fail "a copy failed during the drain"
for ((i = 0; i < 60; i++)); do
	cmp -s "$T/blob" "$M/src/c$i" || fail "src/c$i differs after the drain"
done
grep -q '"topic":"storage-mux.drain.started".*"name":"f"' "$M/.smux/events" ||
	fail "no drain.started event for f"
grep -q '"topic":"storage-mux.drain.completed".*"name":"f"' "$M/.smux/events" ||
	fail "no drain.completed event for f"
echo late >"$M/late"
[ ! -e "$T/b/late" ] || fail "a write reached f while it was drained"
echo "undrain f" >"$CTL"
[ "$(status_of f)" = up ] || fail "f is $(status_of f) after undrain"
repair_until_same

log "--- fault, then repair"
echo "fault f error_rate=1" >"$CTL"
for i in 1 2 3 4 5; do echo "missed $i" >"$M/m$i"; done
[ "$(stats "$M" .pendingHints)" -gt 0 ] || fail "no hint pending while f fails every call"
[ ! -e "$T/b/m1" ] || fail "m1 reached f while it failed every call"
echo "fault f off" >"$CTL"
repair_until_same

log "--- refused commands change nothing"
before=$(jq -c '[.backends[] | [.name, .status]]' "$M/.smux/stats")
expect_errno() { # ERRNO-TEXT COMMAND...
	local want=$1 out
	shift
	out=$( (echo "$*" >"$CTL") 2>&1) && fail "\"$*\" was accepted"
	case $out in *"$want"*) ;; *) fail "\"$*\": $out (want $want)" ;; esac
}
expect_errno "Invalid argument" "bogus f"
expect_errno "Invalid argument" "drain"
expect_errno "Invalid argument" "drain a b"
expect_errno "Invalid argument" "fault a error_rate=1"
expect_errno "Invalid argument" "fault f error_rate=2"
expect_errno "Invalid argument" "fault f colour=blue"
expect_errno "No such file or directory" "drain nosuch"
expect_errno "No such file or directory" "fault nosuch off"
# the first failing line of a write(2) stops it; earlier lines are done
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, b"undrain a\nbogus\ndrain a\n")
except OSError as e:
    sys.exit(0 if e.errno == 22 else 1)
sys.exit(1)' "$CTL" || fail "a write(2) with a bad line was not refused with EINVAL"
[ "$(status_of a)" = up ] || fail "a line after the failing one was carried out"
# a write(2) larger than the kernel passes in one piece (1 MiB) reached
# the daemon as two: a command cut at the seam ran in two halves. One
# over 64 KiB is refused whole, nothing carried out
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, (b"#" * 999 + b"\n") * 1100 + b"drain a\n")
except OSError as e:
    sys.exit(0 if e.errno == 22 else 1)
sys.exit(1)' "$CTL" || fail "a write(2) of 1.1 MB to .smux/ctl was not refused with EINVAL"
[ "$(status_of a)" = up ] || fail "a write(2) of 1.1 MB to .smux/ctl carried out part of it"
if id nobody >/dev/null 2>&1; then
	chmod 755 "$T"
	su nobody -s /bin/sh -c "echo 'drain a' > '$CTL'" 2>/dev/null &&
		fail "user nobody could write .smux/ctl"
fi
[ "$(jq -c '[.backends[] | [.name, .status]]' "$M/.smux/stats")" = "$before" ] ||
	fail "a refused command changed the tree"
grep -q '"topic":"smuxfs.ctl","command":"drain nosuch","result":"failed".*"reason":"no member named' \
	"$M/.smux/events" || fail "no smuxfs.ctl event gives the reason of a refused command"
# a line of bytes that are not UTF-8, or of control characters, is in the
# events too, those bytes shown as '?' (JSON strings are UTF-8; a terminal
# reading the log takes no escape sequence from it)
(printf 'drain \377x\033[2J\n' >"$CTL") 2>/dev/null && fail "drain of a name not in the tree was accepted"
grep -q '"command":"drain ?x?\[2J","result":"failed".*"reason":"no member named \\"?x?\[2J\\"' "$M/.smux/events" ||
	fail "a refused command of bytes that are not UTF-8 is not in the events: $(tail -n 2 "$M/.smux/events")"

log "--- smuxctl"
SMUXCTL=${SMUXCTL:-$(dirname "$SMUXFS")/smuxctl}
mkdir -p "$M/deep/er"
(cd "$M/deep/er" && "$SMUXCTL" status) >"$T/status.out" || fail "smuxctl status from inside the mount"
grep -Eq '^ +a +up ' "$T/status.out" && grep -Eq '^ +f +up ' "$T/status.out" ||
	fail "smuxctl status lacks the members: $(cat "$T/status.out")"
grep -q 'pending hints 0' "$T/status.out" || fail "smuxctl status lacks pending hints"
(cd "$M/deep" && "$SMUXCTL" drain f) || fail "smuxctl drain f"
[ "$(status_of f)" = draining ] || fail "smuxctl drain did not drain f"
"$SMUXCTL" -m "$M/deep" undrain f || fail "smuxctl -m undrain f"
[ "$(status_of f)" = up ] || fail "smuxctl undrain did not undrain f"
rc=0; "$SMUXCTL" -m "$M" drain nosuch 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "smuxctl drain nosuch exited $rc, not 1"
rc=0; "$SMUXCTL" -m "$M" frobnicate 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "smuxctl frobnicate exited $rc, not 2"
rc=0; "$SMUXCTL" -m "$T" status 2>/dev/null || rc=$?
[ "$rc" -eq 3 ] || fail "smuxctl outside a mount exited $rc, not 3"
"$SMUXCTL" -m "$M" stats --json | jq -e '.name == "m"' >/dev/null || fail "smuxctl stats --json"
"$SMUXCTL" -m "$M" metrics >"$T/metrics.out" || fail "smuxctl metrics failed"
grep -q '^smux_backend_up{' "$T/metrics.out" || fail "smuxctl metrics lacks smux_backend_up"
timeout 10 "$SMUXCTL" -m "$M" events -f >"$T/follow.out" &
fpid=$!
for ((i = 0; i < 100; i++)); do [ -s "$T/follow.out" ] && break; sleep 0.05; done
"$SMUXCTL" -m "$M" weight f 2 2>/dev/null || true # a ctl line to follow
for ((i = 0; i < 100; i++)); do
	grep -q '"command":"weight f 2"' "$T/follow.out" && break
	sleep 0.05
done
kill "$fpid" 2>/dev/null || true
wait "$fpid" 2>/dev/null || true
grep -q '"command":"weight f 2"' "$T/follow.out" || fail "smuxctl events -f did not follow"

log "--- remove"
echo "remove f" >"$CTL"
[ "$(jq '.backends | length' "$M/.smux/stats")" -eq 1 ] || fail "f still listed after remove"
grep -q '"topic":"storage-mux.backend.removed".*"name":"f"' "$M/.smux/events" ||
	fail "no backend.removed event"
echo after >"$M/after-remove"
[ ! -e "$T/b/after-remove" ] || fail "a removed backend got a write"

log "--- add"
expect_errno "File exists" "add a"
expect_errno "No such file or directory" "add nosuch"
expect_errno "Invalid argument" "add f into m"
echo "add f" >"$CTL" || fail "add f (back) failed"
[ "$(jq '.backends | length' "$M/.smux/stats")" -eq 2 ] || fail "f not listed after add"
grep -q '"topic":"storage-mux.backend.added".*"name":"f"' "$M/.smux/events" ||
	fail "no backend.added event"
echo back >"$M/after-add"
[ "$(cat "$T/b/after-add" 2>/dev/null)" = back ] || fail "the added f took no write"
# a section written after the mount
cfg_file c "$T/c"
echo "add c to m" >"$CTL" || fail "add c to m (a section added to the file) failed"
echo third >"$M/three"
[ "$(cat "$T/c/three" 2>/dev/null)" = third ] || fail "c took no write"
# a section the mirror reaches already - the directory behind f, a
# wrapper of a, a mux over a - would take every write twice, as the load
# refuses it (s41-t1: add returned 0 and an append was stored twice on b)
cfg_faulty wa a
cfg_mux sub failover "a"
for n in b wa sub; do
	expect_errno "Invalid argument" "add $n"
	grep -q "\"command\":\"add $n\",\"result\":\"failed\".*reached through both" "$M/.smux/events" ||
		fail "the refused add $n does not say why: $(grep "add $n" "$M/.smux/events" | tail -1)"
done
[ "$(jq '.backends | length' "$M/.smux/stats")" -eq 3 ] || fail "a refused add changed the tree"
echo once >>"$M/three"
[ "$(grep -c once "$T/b/three")" = 1 ] || fail "an append stored $(grep -c once "$T/b/three") times on b"
# a section the file gets wrong is refused with its line
cfg_raw "[backend d]"
cfg_raw "type = file"
cfg_raw "path = relative/dir"
expect_errno "Invalid argument" "add d"
grep -q '"command":"add d","result":"failed".*ctl.conf:' "$M/.smux/events" ||
	fail "the refused add does not name the config file and line"
[ "$(jq '.backends | length' "$M/.smux/stats")" -eq 3 ] || fail "a refused add changed the tree"
unmount_smux "$M"

log "--- reload"
new_config "$T/rl.conf" r
cfg_mux r mirror "ra rf" backend_timeout=5s cooldown=200ms
cfg_file ra "$T/ra"
cfg_faulty rf rb
cfg_file rb "$T/rb"
cfg_file rg "$T/rg"
mount_smux "$T/rl.conf" "$M"
members() { jq -c '[.backends[].name]' "$M/.smux/stats"; }
# a copy loop runs through every reload: none of its copies may fail
(
	for ((i = 0; i < 150; i++)); do
		cp "$T/blob" "$M/loop$((i % 20))" || exit 1
	done
) &
cpid=$!
sed -i 's/^backends = ra rf$/backends = ra rf rg/' "$T/rl.conf"
sed -i '/^wraps = rb$/a error_rate = 1.0' "$T/rl.conf"
"$SMUXCTL" -m "$M" reload || fail "reload (add rg, faults on rf) refused"
[ "$(members)" = '["ra","rf","rg"]' ] || fail "members after reload: $(members)"
echo new >"$M/after-reload"
[ "$(cat "$T/rg/after-reload" 2>/dev/null)" = new ] || fail "rg took no write after the reload"
[ ! -e "$T/rb/after-reload" ] || fail "rf's new faults were not applied"
sed -i 's/^backends = ra rf rg$/backends = ra rg/' "$T/rl.conf"
echo reload >"$CTL" || fail "reload (remove rf) refused"
[ "$(members)" = '["ra","rg"]' ] || fail "members after removing rf: $(members)"
grep -q '"topic":"storage-mux.backend.removed".*"name":"rf"' "$M/.smux/events" ||
	fail "no backend.removed event for rf"
# refused reloads change nothing
cp "$T/rl.conf" "$T/rl.good"
sed -i 's/^mode = mirror$/mode = failover/' "$T/rl.conf"
expect_errno "Invalid argument" reload
grep -q '"command":"reload","result":"failed".*mode mirror to failover needs a remount' 	"$M/.smux/events" || fail "a refused reload does not say why"
cp "$T/rl.good" "$T/rl.conf"
printf '[backend broken\n' >>"$T/rl.conf"
expect_errno "Invalid argument" reload
grep -q '"command":"reload","result":"failed".*rl.conf:' "$M/.smux/events" ||
	fail "a reload of a bad file does not name the file and line"
[ "$(members)" = '["ra","rg"]' ] || fail "a refused reload changed the tree: $(members)"
# SIGHUP reloads too
cp "$T/rl.good" "$T/rl.conf"
sed -i 's/^backends = ra rg$/backends = ra rg rf/' "$T/rl.conf"
for pid in $(daemon_pids_for "$M"); do kill -HUP "$pid"; done
for ((i = 0; i < 100; i++)); do
	[ "$(members)" = '["ra","rg","rf"]' ] && break
	sleep 0.05
done
[ "$(members)" = '["ra","rg","rf"]' ] || fail "SIGHUP did not reload: $(members)"
mountpoint -q "$M" || fail "SIGHUP ended the mount"
wait "$cpid" || fail "a copy failed during the reloads"
unmount_smux "$M"

log "--- weight"
new_config "$T/w.conf" w
cfg_mux w weighted "w1 w2"
cfg_file w1 "$T/pool" weight=1
cfg_file w2 "$T/pool" weight=1
echo pooled >"$T/pool/p"
mount_smux "$T/w.conf" "$M"
echo "weight w1 0" >"$CTL"
[ "$(jq '.backends[] | select(.name == "w1") | .weight' "$M/.smux/stats")" = 0 ] ||
	fail "w1's weight is not 0 in stats"
h1=$(backend_stat "$M" w1 hits)
h2=$(backend_stat "$M" w2 hits)
for ((i = 0; i < 40; i++)); do cat "$M/p" >/dev/null; stat "$M/p" >/dev/null; done
[ "$(backend_stat "$M" w1 hits)" -eq "$h1" ] || fail "w1 at weight 0 still took calls"
[ "$(backend_stat "$M" w2 hits)" -gt "$h2" ] || fail "w2 took no calls"

# smuxctl on a mount whose daemon died says so (it said the path was not
# inside a smuxfs mount, s41-t1)
take_fg_daemon "$M"
kill -KILL "$FG_PID"
wait "$FG_PID" 2>/dev/null || true
rc=0
out=$("$SMUXCTL" -m "$M" status 2>&1) || rc=$?
timeout 20 fusermount3 -u "$M" 2>/dev/null || umount -l "$M"
_smux_forget_mount "$M"
[ "$rc" = 3 ] || fail "smuxctl on a dead mount: exit $rc, want 3 ($out)"
case $out in *"daemon is gone"*) ;; *) fail "smuxctl on a dead mount: $out" ;; esac

# add into a failover that a mirror holds: the mirror writes it too, so a
# directory of the tree added there takes every write twice (s41-t4: the
# add was accepted, and an append was stored twice on r1 once fa failed)
new_config "$T/nest.conf" m
cfg_mux m mirror "r1 sub"
cfg_file r1 "$T/r1"
cfg_mux sub failover "fa"
cfg_faulty fa na
cfg_file na "$T/na"
cfg_file samepath "$T/r1"
mount_smux "$T/nest.conf" "$M"
CTL=$M/.smux/ctl
expect_errno "Invalid argument" "add samepath to sub"
unmount_smux "$M"
log "ok"
