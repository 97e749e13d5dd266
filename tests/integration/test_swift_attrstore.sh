#!/usr/bin/env bash
# test_swift_attrstore.sh - the swift backend's attribute cache
# (core/attrstore.c) on a mount of one swift backend (issue 12): files,
# modes, owners, mtimes and a symlink written through the mount; after a
# remount `ls -lR` shows the same and sends no HEAD of a file (the
# listing's hash, bytes and last_modified match what the backend stored),
# and `cat` of every file costs its GET alone. Objects changed behind the
# mount - other content (a PUT), metadata only (a POST, as swiftclient's
# `swift post -m` does: last_modified moves, the hash stays) - show their
# new attributes after the next remount, each asked with one HEAD.
# Requests are counted from the Swift proxy's log (req_log.sh).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/req_log.sh"
CONTAINER=attrs-$$-$RANDOM
start_logged_swift

CONF=$T/swift.conf
new_config "$CONF" s
cfg_raw "[backend s]
type = swift
auth_url = $SWIFT_AUTH_URL
container = $CONTAINER
credentials_env = SMUX_IT_SWIFT_CRED
"
STORE=$T/state/swift/attrs/swift-s.db
M=$T/mnt

mount_smux "$CONF" "$M" || fail "mount failed"
N=10
attr_tree $N
# directories' times here come from the listings, not from the store:
# files only
lsf() { lsr | grep -v '^d'; }
lsf >"$T/want"
unmount_smux "$M"

# 1. After a remount: no HEAD of a file, the same attributes; cat: GETs.
mount_smux "$CONF" "$M" || fail "remount failed"
h=$(listed_heads "$T/got" lsf)
diff "$T/want" "$T/got" || fail "ls -lR after the remount differs (above)"
[ -z "$h" ] || fail "ls -lR after the remount sent HEADs of files: $(echo $h)"
[ -s "$STORE" ] || fail "no attribute store at $STORE"
cat_tree $N
unmount_smux "$M"
log "ls -lR after a remount: no HEAD of a file, same attributes; cat: no HEAD"

# 2. Behind the mount: other content (a PUT without metadata: 0644), and
# a metadata-only POST (mode 0700, owner 4321:8765, mtime 1500000000).
sleep 1.1
curl -sf -X PUT -H "X-Auth-Token: $TOKEN" --data-binary 'A FILE 1' \
	"$SURL/$CONTAINER/a/f1" >/dev/null || fail "PUT a/f1"
curl -sf -X POST -H "X-Auth-Token: $TOKEN" -H "X-Object-Meta-Mode: 100700" \
	-H "X-Object-Meta-Uid: 4321" -H "X-Object-Meta-Gid: 8765" \
	-H "X-Object-Meta-Mtime: 1500000000" \
	"$SURL/$CONTAINER/a/f3" >/dev/null || fail "POST a/f3"
mount_smux "$CONF" "$M" || fail "remount failed"
h=$(listed_heads "$T/got2" lsf | sed 's|.*/||' | sort | tr '\n' ' ')
[ "$h" = "f1 f3 " ] ||
	fail "ls -lR after changes behind the mount: HEADs of files '$h', want f1 and f3"
[ "$(stat -c '%a %s' "$M/a/f1")" = "644 8" ] ||
	fail "a/f1 rewritten behind the mount shows $(stat -c '%a %s' "$M/a/f1")"
[ "$(stat -c '%a %u %g %Y' "$M/a/f3")" = "700 4321 8765 1500000000" ] ||
	fail "a/f3 changed by a POST behind the mount shows $(stat -c '%a %u %g %Y' "$M/a/f3")"
grep -v -e ' f1$' -e ' f3$' "$T/want" >"$T/want.rest"
grep -v -e ' f1$' -e ' f3$' "$T/got2" >"$T/got2.rest"
diff "$T/want.rest" "$T/got2.rest" || fail "other entries changed (above)"
unmount_smux "$M"
mount_smux "$CONF" "$M" || fail "remount failed"
h=$(listed_heads "$T/got3" lsf)
[ -z "$h" ] || fail "ls -lR after the HEADs refreshed the store sent: $(echo $h)"
diff "$T/got2" "$T/got3" || fail "ls -lR differs from the one before (above)"
unmount_smux "$M"
log "changed behind the mount: each asked once with a HEAD, new attributes shown"
