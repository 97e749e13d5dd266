#!/usr/bin/env bash
# test_failover_dirmv.sh - `mv` of a directory on a failover mount
# [d = nginx WebDAV, f = local] while d, the first member, is out.
#
# In failover the first member up holds the tree; f only holds what was
# written while d was out (a hint brings it to d later). A directory
# renamed while d was still out (nginx stopped, then answering again but
# d still in its cooldown) was listed from f alone: mv moved D/two, which
# f held, and reported success; d kept D/one and D/sub, so after the
# repair D was back with them and E lacked them (s42-t3). The rename of a
# directory now needs every member that may hold keys no other lists: it
# fails (EIO, nothing moved) while d is out, and works once d is back.
. "$(dirname "$0")/lib.sh"

start_nginx_dav "$T/ng"
mkdir -p "$T/ng/root/m" "$T/f"
new_config "$T/c.conf" m
cfg_mux m failover "d f" backend_timeout=2s cooldown=8s max_cooldown=8s
cfg_file f "$T/f"
cfg_raw "[backend d]
type = http
url = $DAV_URL/m/
"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

# tree: every file under D, sorted, as NAME=CONTENT
tree() {
	(cd "$M" && timeout 20 find "$@" -type f | sort | while read -r p; do
		printf '%s=%s ' "$p" "$(cat "$p")"
	done)
}

mkdir "$M/D" "$M/D/sub"
echo one >"$M/D/one"
echo s >"$M/D/sub/s"
[ -f "$T/ng/root/m/D/one" ] || fail "D/one not written to d, the first member"
kill -STOP "$NGINX_PID"
timeout 30 sh -c "echo two >'$M/D/two'" || fail "write of D/two with d stopped"
kill -CONT "$NGINX_PID"
[ "$(backend_stat "$M" d status)" = down ] ||
	fail "d not down after a write timed out on it: $(backend_stat "$M" d status)"

# d answers again, but is in its cooldown: the mount cannot list D whole
rc=0
timeout 30 mv "$M/D" "$M/E" 2>"$T/mv.err" || rc=$?
[ "$rc" != 0 ] || fail "mv D E with d out succeeded (it can only move what f lists)"
grep -q "Input/output error" "$T/mv.err" || fail "mv D E with d out: $(cat "$T/mv.err")"
[ ! -e "$M/E" ] || fail "mv D E failed, yet E exists: $(tree E)"
log "mv D E with d out: $(cat "$T/mv.err")"
# ... also one made while d is out: d may hold an older directory of
# that name, with files a removal through the mount never saw (s43-t5:
# rm -rf y; mkdir y; mv y ym left d's y/recent behind, a hint that never
# ended and a broken entry)
mkdir "$M/N.tmp" "$M/N.tmp/sub"
echo n >"$M/N.tmp/sub/n"
rc=0
timeout 30 mv "$M/N.tmp" "$M/N" 2>/dev/null || rc=$?
[ "$rc" != 0 ] || fail "mv N.tmp N with d out succeeded"

# d back (a repair probes it and replays f's write of D/two): mv works
# and moves all of D
for ((i = 0; i < 100; i++)); do
	echo repair >"$M/.smux/ctl" 2>/dev/null || true
	[ "$(backend_stat "$M" d status)" = up ] && break
	sleep 0.3
done
[ "$(backend_stat "$M" d status)" = up ] || fail "d not up after 30 s of repairs"
timeout 30 mv "$M/D" "$M/E" || fail "mv D E with d up"
want="E/one=one E/sub/s=s E/two=two "
got=$(tree E)
[ "$got" = "$want" ] || fail "after mv D E: '$got', want '$want'"
repair_settled "$M" 30
got=$(tree E)
[ "$got" = "$want" ] || fail "after the repair: '$got', want '$want'"
[ ! -e "$M/D" ] || fail "D is back after the repair: $(tree D)"
[ "$(tree N.tmp)" = "N.tmp/sub/n=n " ] || fail "N.tmp after the repair: $(tree N.tmp)"
[ "$(cat "$T/ng/root/m/N.tmp/sub/n")" = n ] || fail "N.tmp/sub/n not on d after the repair"
[ ! -e "$T/ng/root/m/D" ] || fail "d still holds D: $(cd "$T/ng/root/m" && find D)"
got=$(cd "$T/ng/root/m" && find E -type f | sort | tr '\n' ' ')
[ "$got" = "E/one E/sub/s E/two " ] || fail "d holds '$got' under E"
log "mv D E with d up moved the whole tree: $got"
unmount_smux "$M"
