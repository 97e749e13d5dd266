#!/usr/bin/env bash
# test_mixed_modes.sh - a mirror of an s3 backend (keeps modes) and an
# nginx WebDAV backend (keeps none: its files show 0644) while the S3
# server is out (s3rver killed, then started again on its port and data):
#   - a 0600 file appended to during the outage is still 0600 once S3 is
#     back and replayed (before: the replay took nginx's made-up 0644 and
#     stored it on S3 - a private file made world-readable for good,
#     s49-t1); so is a directory's 0700;
#   - a file of a mode S3 already had keeps it, one made during the
#     outage gets nginx's 0644 (a limit, configuration.md: a mode set
#     while no member that keeps modes is up is not kept).
# What S3 holds is read through the mount with the WebDAV member drained.
# Then a mirror of a file backend and lighttpd, which keeps modes (in
# properties): chmods made while the file member was drained reach it
# (the review of the first fix: it kept the file member's old modes).
. "$(dirname "$0")/lib.sh"

# s3rver of this test's own (killed and started again), outside $T with
# a stopper tied to this shell (as test_s3_faults.sh)
S3D=$(mktemp -d /tmp/smux-s3m.XXXXXX)
(tail --pid=$$ -f /dev/null 2>/dev/null
	"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1
	rm -rf "$S3D") &
"$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null || fail "s3rver did not start"
EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
PORT=${EP##*:}
curl -sf -X PUT "$EP/modes" >/dev/null || fail "cannot create bucket"
start_nginx_dav "$T/ng"
mkdir -p "$T/ng/root/m"
export S3M_ACCESS_KEY_ID=S3RVER S3M_SECRET_ACCESS_KEY=S3RVER

new_config "$T/c.conf" m backend_timeout=5s
cfg_mux m mirror "s d"
cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = modes
credentials_env = S3M

[backend d]
type = http
url = $DAV_URL/m/
"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

echo secret >"$M/private"
chmod 600 "$M/private"
[ "$(stat -c %a "$M/private")" = 600 ] || fail "chmod 600 with both up: $(stat -c %a "$M/private")"
echo plain >"$M/open"
mkdir "$M/dir"
chmod 700 "$M/dir"
echo in >"$M/dir/f"

# the outage
kill -KILL "$(head -n 1 "$S3D/pids")"
"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1
echo more >>"$M/private" || fail "append during the outage failed"
echo again >>"$M/dir/f" || fail "append in dir during the outage failed"
touch "$M/dir" || fail "touch of dir during the outage failed" # its marker replayed
echo new >"$M/new" || fail "create during the outage failed"
S3RVER_PORT=$PORT timeout 120 "$SMUX_REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null ||
	fail "s3rver did not start again"
echo repair >"$CTL" 2>/dev/null || true
repair_settled "$M" 60

# what S3 holds, with nginx out of the way
echo "drain d" >"$CTL"
[ "$(stat -c %a "$M/private")" = 600 ] ||
	fail "private: mode $(stat -c %a "$M/private") on S3 after the replay, not 600"
[ "$(cat "$M/private")" = "$(printf 'secret\nmore')" ] ||
	fail "private: '$(cat "$M/private")' on S3 after the replay"
[ "$(stat -c %a "$M/open")" = 644 ] ||
	fail "open: mode $(stat -c %a "$M/open") on S3, not the 644 it had"
[ "$(stat -c %a "$M/dir")" = 700 ] ||
	fail "dir: mode $(stat -c %a "$M/dir") on S3 after the replay, not 700"
[ "$(cat "$M/new")" = new ] || fail "new: '$(cat "$M/new")' on S3 after the replay"
# the limit configuration.md states: made while only nginx was up, 0644
[ "$(stat -c %a "$M/new")" = 644 ] || fail "new: mode $(stat -c %a "$M/new") on S3"
# and with S3 up again, a chmod is kept
chmod 640 "$M/open"
echo "undrain d" >"$CTL"
repair_settled "$M" 60
[ "$(stat -c %a "$M/open")" = 640 ] || fail "open: chmod 640 shows $(stat -c %a "$M/open")"
log "modes S3 had kept through its outage and the replays from nginx"
unmount_smux "$M"

start_lighttpd_dav "$T/lt"
mkdir -p "$T/lt/root/m"
new_config "$T/l.conf" m
cfg_mux m mirror "a d"
cfg_file a "$T/a"
cfg_raw "[backend d]
type = http
url = $DAV_URL/m/
"
mount_smux "$T/l.conf" "$M"
for f in secret script app; do
	echo "$f" >"$M/$f"
	chmod 644 "$M/$f"
done
echo "drain a" >"$CTL"
chmod 600 "$M/secret"
chmod 755 "$M/script"
echo more >>"$M/app"
chmod 700 "$M/app"
echo "undrain a" >"$CTL"
repair_settled "$M" 30
for w in secret:600 script:755 app:700; do
	[ "$(stat -c %a "$T/a/${w%:*}")" = "${w#*:}" ] ||
		fail "lighttpd mirror: a's ${w%:*} is $(stat -c %a "$T/a/${w%:*}"), not ${w#*:}"
done
log "modes lighttpd keeps reach the file member through the replays"
unmount_smux "$M"
