#!/usr/bin/env bash
# test_reload.sh - live reload and `add` beyond test_ctl.sh (issue 11):
#   - -o options given at mount time reach what `add NAME` and a reload
#     build (a mux added gets the -o state_dir for its hint journal), and
#     .smux/config still shows them after a reload;
#   - what a running mux cannot change is refused with EINVAL and a reason
#     naming the section and key (mode, cooldown, backend_timeout, the
#     order of running members, a new member listed before a running one,
#     a running backend's path, a [mount] key, a mirror keeping none of
#     its running members, a new file backend under the mount point, also
#     through a symlink, by reload or add) and changes nothing; what
#     it can change (a weight, a member added at the end) is applied; in
#     sticky-by-key a removed shard listed again at its place comes back
#     (its slot) and every key reads as before;
#   - a reload adds and removes an http (WebDAV) backend on an nginx the
#     test starts on loopback, which then takes (and stops taking) writes;
#   - kill -9 of the daemon while a reload waits for a removed member's
#     call in flight: the mount comes back with the edited file, every
#     closed file intact, and the remaining replica takes writes.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
CTL=$M/.smux/ctl
members() { jq -c '[.backends[].name]' "$M/.smux/stats"; }
expect_errno() { # ERRNO-TEXT COMMAND...
	local want=$1 out
	shift
	out=$( (echo "$*" >"$CTL") 2>&1) && fail "\"$*\" was accepted"
	case $out in *"$want"*) ;; *) fail "\"$*\": $out (want $want)" ;; esac
}
# refused_reload GREP-PATTERN: a reload fails with EINVAL and its event
# line says PATTERN; the members stay as they were
refused_reload() {
	local before
	before=$(members)
	expect_errno "Invalid argument" reload
	tail -n 5 "$M/.smux/events" | grep -q "\"command\":\"reload\",\"result\":\"failed\".*$1" ||
		fail "a refused reload does not say \"$1\": $(tail -n 1 "$M/.smux/events")"
	[ "$(members)" = "$before" ] || fail "a refused reload changed the members: $(members)"
}

log "--- -o options reach add and reload"
new_config "$T/o.conf" m
cfg_mux m mirror "a" cooldown=200ms
cfg_file a "$T/a"
cfg_file b "$T/b"
cfg_mux inner mirror "x"
cfg_file x "$T/x"
mount_smux "$T/o.conf" "$M" "attr_timeout=7,state_dir=$T/ostate"
[ -f "$T/ostate/m.hints" ] || fail "-o state_dir was not used at mount"
echo "add inner to m" >"$CTL" || fail "add inner refused"
[ -f "$T/ostate/inner.hints" ] || fail "add inner ignored -o state_dir (journal not in $T/ostate)"
[ ! -e "$T/state/o/inner.hints" ] || fail "add inner used the file's state_dir, not -o's"
sed -i 's/^backends = a$/backends = a inner b/' "$T/o.conf"
echo reload >"$CTL" || fail "reload (add b) refused"
[ "$(members)" = '["a","inner","b"]' ] || fail "members after reload: $(members)"
[ "$(jq -r .mount.attr_timeout "$M/.smux/config")" = 7s ] ||
	fail ".smux/config lost -o attr_timeout after a reload: $(jq -c .mount "$M/.smux/config")"
[ "$(jq -r .mount.state_dir "$M/.smux/config")" = "$T/ostate" ] ||
	fail ".smux/config lost -o state_dir after a reload"
# a mirror whose running members are all replaced at once: what they hold
# would be gone from the mount (none left to fill the new one from)
cfg_file c "$T/c"
sed -i 's/^backends = a inner b$/backends = c/' "$T/o.conf"
refused_reload '\[mux m\] backends: keeps none of its running members'
sed -i 's/^backends = c$/backends = a inner b/' "$T/o.conf"
unmount_smux "$M"

log "--- what a running mux cannot change is refused, naming the key"
new_config "$T/r.conf" r
cfg_mux r weighted "ra rb" cooldown=200ms backend_timeout=5s
cfg_file ra "$T/ra" weight=1
cfg_file rb "$T/rb" weight=2
cfg_file rc "$T/rc" weight=2
mount_smux "$T/r.conf" "$M"
cp "$T/r.conf" "$T/r.good"
edit() { cp "$T/r.good" "$T/r.conf" && sed -i "$1" "$T/r.conf"; }
edit 's/^mode = weighted$/mode = mirror/'
refused_reload "mode weighted to mirror needs a remount"
edit 's/^cooldown = 200ms$/cooldown = 1s/'
refused_reload '\[mux r\] cooldown changed'
edit 's/^backend_timeout = 5s$/backend_timeout = 9s/'
refused_reload '\[mux r\] backend_timeout changed'
edit 's/^backends = ra rb$/backends = rb ra/'
refused_reload '\[mux r\] backends: ra is listed after rb but runs before it'
edit 's/^backends = ra rb$/backends = ra rc rb/'
refused_reload '\[mux r\] backends: the new member rc is listed before the running member rb'
# a new member under the mount point (also through a symlink): the
# daemon would write through its own mount (at mount it is refused too)
edit "s/^backends = ra rb\$/backends = ra rb rc/; s#^path = $T/rc\$#path = $M/inside#"
refused_reload "\\[backend rc\\] path: $M/inside is under the mount point"
ln -sfn "$M" "$T/to-mnt"
edit "s/^backends = ra rb\$/backends = ra rb rc/; s#^path = $T/rc\$#path = $T/to-mnt/inside#"
refused_reload "\\[backend rc\\] path: $T/to-mnt/inside is under the mount point"
cp "$T/r.good" "$T/r.conf"
sed -i "s#^path = $T/rc\$#path = $T/to-mnt/x#" "$T/r.conf"
expect_errno "Invalid argument" "add rc"
tail -n 3 "$M/.smux/events" | grep -q '"command":"add rc","result":"failed".*is under the mount point' ||
	fail "the refused add does not say why: $(tail -n 1 "$M/.smux/events")"
[ "$(members)" = '["ra","rb"]' ] || fail "add of a member under the mount point changed the members: $(members)"
edit "s#^path = $T/rb\$#path = $T/elsewhere#"
refused_reload '\[backend rb\] path changed'
edit 's/^negative_timeout = .*//; /^\[mount\]$/a negative_timeout = 3s'
refused_reload '\[mount\] negative_timeout changed'
[ "$(jq -r .mount.negative_timeout "$M/.smux/config")" = 1s ] ||
	fail "a refused [mount] change shows in .smux/config"
# what the core can change is applied: a weight, a member at the end,
# and a section not in the tree may change freely
edit 's/^backends = ra rb$/backends = ra rb rc/; s/^weight = 1$/weight = 3/'
sed -i "s#^path = $T/rc\$#path = $T/rc2#" "$T/r.conf"
mkdir -p "$T/rc2"
echo reload >"$CTL" || fail "reload (weight, rc at the end) refused"
[ "$(members)" = '["ra","rb","rc"]' ] || fail "members after reload: $(members)"
[ "$(jq '.backends[] | select(.name == "ra") | .weight' "$M/.smux/stats")" = 3 ] ||
	fail "ra's weight is not 3 after the reload"
# weights handed over: ra alone weighs, then the file gives it 0 and rb
# 1 - rb's rise comes first, so no step leaves every weight 0
setw() { sed -i "/^\[backend $1\]/,/^\$/ s/^weight = .*/weight = $2/" "$T/r.conf"; }
weights() { jq -c '[.backends[].weight]' "$M/.smux/stats"; }
setw rb 0
setw rc 0
echo reload >"$CTL" || fail "reload (rb and rc to weight 0) refused"
[ "$(weights)" = '[3,0,0]' ] || fail "weights after rb and rc to 0: $(weights)"
setw ra 0
setw rb 1
echo reload >"$CTL" || fail "reload handing the weight from ra to rb refused"
[ "$(weights)" = '[0,1,0]' ] || fail "weights after handing over: $(weights)"
# the member that alone weighs is never removed: the mux would draw none
expect_errno "Invalid argument" "remove rb"
[ "$(members)" = '["ra","rb","rc"]' ] || fail "remove of the only weighing member changed the members: $(members)"
unmount_smux "$M"

log "--- sticky-by-key: a removed shard's name comes back at its place"
new_config "$T/s.conf" s
cfg_mux s sticky-by-key "s1 s2 s3"
cfg_file s1 "$T/s1"
cfg_file s2 "$T/s2"
cfg_file s3 "$T/s3"
mount_smux "$T/s.conf" "$M"
for i in 1 2 3 4 5 6; do echo "$i" >"$M/k$i"; done
echo "remove s2" >"$CTL" || fail "remove s2 refused"
[ "$(members)" = '["s1","s3"]' ] || fail "members after remove s2: $(members)"
# the file still lists s1 s2 s3: the reload adds s2 back into its slot
echo reload >"$CTL" || fail "reload (s2 back between s1 and s3) refused"
[ "$(members)" = '["s1","s2","s3"]' ] || fail "members after the reload: $(members)"
for i in 1 2 3 4 5 6; do
	[ "$(cat "$M/k$i")" = "$i" ] || fail "k$i reads wrong after s2 came back"
done
unmount_smux "$M"

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
	fail "nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them)"
fi
log "--- reload adds and removes an http (WebDAV) backend"
NG=$T/ng
mkdir -p "$NG/root"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s#@DIR@#$NG#g; s#@ROOT@#$NG/root#g; s#@PORT@#$PORT#g" \
	-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
	"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$NG/nginx.conf"
"$NGINX" -e "$NG/server.log" -p "$NG" -c "$NG/nginx.conf" >"$NG/server.log" 2>&1 &
NGPID=$!
for ((i = 0; i < 200; i++)); do
	curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
	kill -0 "$NGPID" 2>/dev/null || { cat "$NG/server.log" >&2; fail "nginx exited"; }
	sleep 0.1
done
new_config "$T/h.conf" h
cfg_mux h mirror "hf"
cfg_file hf "$T/hf"
cfg_raw "[backend hd]
type = http
url = http://127.0.0.1:$PORT/
"
mount_smux "$T/h.conf" "$M"
echo before >"$M/before"
sed -i 's/^backends = hf$/backends = hf hd/' "$T/h.conf"
echo reload >"$CTL" || fail "reload (add the http backend) refused"
[ "$(members)" = '["hf","hd"]' ] || fail "members after adding hd: $(members)"
echo on-dav >"$M/after-add"
[ "$(curl -s "http://127.0.0.1:$PORT/after-add")" = on-dav ] ||
	fail "the http backend took no write after the reload"
[ "$(jq -c '[.mux.h.backends, .backend.hd.used]' "$M/.smux/config")" = '[["hf","hd"],true]' ] ||
	fail ".smux/config does not show hd in use after the reload"
sed -i 's/^backends = hf hd$/backends = hf/' "$T/h.conf"
echo reload >"$CTL" || fail "reload (remove the http backend) refused"
[ "$(members)" = '["hf"]' ] || fail "members after removing hd: $(members)"
echo local-only >"$M/after-remove"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/after-remove")" = 404 ] ||
	fail "the removed http backend still took a write"
[ "$(cat "$T/hf/after-remove")" = local-only ] || fail "hf lost a write"
unmount_smux "$M"
kill -TERM "$NGPID" 2>/dev/null || true
wait "$NGPID" 2>/dev/null || true

log "--- kill -9 while a reload waits for a removed member's call in flight"
new_config "$T/k.conf" k
cfg_mux k mirror "ka kf" cooldown=200ms backend_timeout=120s
cfg_file ka "$T/ka"
cfg_faulty kf kb
cfg_file kb "$T/kb"
mount_smux "$T/k.conf" "$M"
for i in 1 2 3; do echo "closed $i" >"$M/c$i"; done
# from now on every call to kf hangs (120 s): a write's call to it stays
# in flight, and the reload's drain of kf waits for it
echo "fault kf hang_rate=1 hang=120s" >"$CTL" || fail "fault kf refused"
(echo hung >"$M/hung") 2>/dev/null &
wpid=$!
for ((i = 0; i < 200; i++)); do
	[ "$(backend_stat "$M" kf inFlightCount)" -gt 0 ] && break
	sleep 0.05
done
[ "$(backend_stat "$M" kf inFlightCount)" -gt 0 ] || fail "no call to kf in flight"
sed -i 's/^backends = ka kf$/backends = ka/' "$T/k.conf"
(echo reload >"$CTL") 2>/dev/null &
rpid=$!
for ((i = 0; i < 200; i++)); do
	grep -q '"topic":"storage-mux.drain.started".*"name":"kf"' "$M/.smux/events" && break
	sleep 0.05
done
grep -q '"topic":"storage-mux.drain.started".*"name":"kf"' "$M/.smux/events" ||
	fail "the reload did not start draining kf"
kill -0 "$rpid" 2>/dev/null || fail "the reload returned while a call to kf was in flight"
crash_smux "$M"
wait "$rpid" "$wpid" 2>/dev/null || true
mount_smux "$T/k.conf" "$M"
[ "$(members)" = '["ka"]' ] || fail "members after the restart: $(members)"
for i in 1 2 3; do
	[ "$(cat "$M/c$i")" = "closed $i" ] || fail "c$i lost in the crash during the reload"
done
echo after >"$M/after-crash"
[ "$(cat "$T/ka/after-crash")" = after ] || fail "ka takes no write after the restart"
unmount_smux "$M"

log "--- a mux's backend_timeout is the mount's unless it sets its own"
new_config "$T/q.conf" q backend_timeout=4s
cfg_mux q mirror "qa qb"
cfg_file qa "$T/qa"
cfg_file qb "$T/qb"
mount_smux "$T/q.conf" "$M"
[ "$(jq -r .mux.q.backend_timeout "$M/.smux/config")" = 4s ] ||
	fail "the mux's backend_timeout under [mount] 4s: $(jq -c .mux.q "$M/.smux/config")"
before=$(members)
# the value it runs with, written into its section: nothing changes (s45-t3)
sed -i '/^\[mux q\]$/a backend_timeout = 4s' "$T/q.conf"
echo reload >"$CTL" || fail "a reload that writes the mux's running backend_timeout was refused"
sed -i 's/^backend_timeout = 4s$/backend_timeout = 6s/' "$T/q.conf"
sed -i '0,/^backend_timeout = 6s$/s//backend_timeout = 4s/' "$T/q.conf"
grep -q "^backend_timeout = 6s" "$T/q.conf" || fail "test setup: no 6s in the mux"
refused_reload '\[mux q\] backend_timeout changed'
unmount_smux "$M"
log "ok"
