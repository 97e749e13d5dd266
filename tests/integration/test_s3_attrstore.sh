#!/usr/bin/env bash
# test_s3_attrstore.sh - the s3 backend's attribute cache
# (core/attrstore.c) on a mount of one s3 backend over an s3rver this
# test starts (issue 10: ls -lR, cat, rm -r after a remount). Files,
# modes, owners, mtimes and a symlink written through the mount; after a
# remount `ls -lR` shows the same and sends no HEAD of a file (the
# listing's etag, size and LastModified match what the backend stored;
# directories, listed as common prefixes with no etag, are still asked,
# one HEAD each), and `cat` of every file costs its GET alone. Objects
# changed behind the mount - other content (a PUT), the same content with
# other metadata (a PUT) - show their new attributes after the next
# remount, each asked with one HEAD; a CopyObject in place with REPLACE
# metadata (s3fs's chmod) likewise, on Swift's S3 API (s3rver does not
# move LastModified on such a copy; S3 and Swift do).
# A garbage file in place of the store does not stop the mount (it is
# rebuilt), and attr_store = false sends the HEADs as before.
. "$(dirname "$0")/lib.sh"

command -v aws >/dev/null || fail "aws CLI missing (scripts/install-deps.sh installs awscli)"

. "$(dirname "$0")/req_log.sh"
B=smux-attrs
start_logged_s3rver "$B"
awsc() {
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
		AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "$EP" "$@"
}

# config FILE [BACKEND KEY=VALUE...]: a mount of the s3 backend alone,
# with the mount's defaults for the kernel's and the daemon's caches
config() {
	local f=$1 kv
	shift
	new_config "$f" s
	cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3T"
	for kv in "$@"; do cfg_raw "${kv%%=*} = ${kv#*=}"; done
}
# s3rver checks the access key, not the signature: the secret is a canary
# that must never be in the store
CANARY=smux-attrstore-canary-7f3e
export S3T_ACCESS_KEY_ID=S3RVER S3T_SECRET_ACCESS_KEY=$CANARY
CONF=$T/s3.conf
config "$CONF"
STORE=$T/state/s3/attrs/s3-s.db
M=$T/mnt

# dir_heads BEFORE AFTER: how many HEADs of directory keys ("d/")
dir_heads() {
	reqs_between "$1" "$2" | awk '$1 == "HEAD" && $2 ~ /\/$/' | wc -l
}

mount_smux "$CONF" "$M" || { stop_s3; fail "mount failed"; }
N=20
attr_tree $N
chown 1234:5678 "$M/a/f4"
ln -s ../a/f2 "$M/b/sym2"
mkdir "$M/b/sub"
printf 'deep\n' >"$M/b/sub/deep"
chmod 0444 "$M/b/sub/deep"
lsr >"$T/want"
unmount_smux "$M"

# 1. After a remount: ls -lR sends no HEAD of a file, shows the same.
mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
before=$(mark)
lsr >"$T/got"
after=$(mark)
diff "$T/want" "$T/got" || fail "ls -lR after the remount differs (above)"
h=$(file_heads "$before" "$after")
[ -z "$h" ] || fail "ls -lR after the remount sent HEADs of files: $(echo $h)"
nd=$(dir_heads "$before" "$after")
# a, b, b/sub: one HEAD each at most
[ "$nd" -le 3 ] || fail "ls -lR sent $nd HEADs of directories (3 at most)"
log "ls -lR after a remount: no HEAD of a file, $nd of directories, same attributes"
[ -s "$STORE" ] || fail "no attribute store at $STORE"
stat -c %a "$STORE" | grep -qx 600 || fail "the store is not 0600: $(stat -c %a "$STORE")"
! grep -aq -e "$CANARY" -e S3RVER "$STORE"* || fail "a credential is in the store"

# 2. cat of every listed file: its GET alone.
cat_tree $N
[ "$(cat "$M/a/f7")" = "a file 7" ] || fail "a/f7 reads $(cat "$M/a/f7")"
unmount_smux "$M"

# 2b. find first, cat later (`find -exec cat {} +`): the attributes the
# listing gave have expired (attr_timeout, 1 s by default) when the files
# are opened; each directory is listed again (relist.c), no HEAD.
mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
find "$M" -type f | sort >"$T/files"
sleep 1.5
before=$(mark)
xargs cat <"$T/files" >/dev/null
after=$(mark)
h=$(file_heads "$before" "$after")
[ -z "$h" ] || fail "cat 1.5 s after find sent HEADs of files: $(echo $h | cut -c1-300)"
nl=$(reqs_between "$before" "$after" | awk '$1 == "GET" && $2 ~ /list-type/' | wc -l)
[ "$nl" -le 4 ] || fail "cat 1.5 s after find listed $nl times (a, b, b/sub: 3)"
unmount_smux "$M"
log "cat after the listing's attributes expired: each directory listed again, no HEAD"

# 2c. The kernel's attributes outlive the daemon's: the kernel counts
# attr_timeout from the READDIRPLUS reply, the daemon from before the
# listing it asked (what it keeps is never older than it says). A listing
# slower than attr_timeout (a faulty wrapper's latency, 2.5 s against
# 2 s) makes the window certain: `cat` right after it sends no LOOKUP of
# the file, so its open is the first request to miss the daemon's
# attributes, and lists the directory again (relist.c) instead of a HEAD.
# Under load the window opens without the latency (make check: cat_tree
# above failed 3 of 4 CI runs with one HEAD, b/f6, b/f17, b/f20).
# (s3.conf in another directory: the same state_dir, the store above)
mkdir -p "$T/slow"
new_config "$T/slow/s3.conf" m attr_timeout=2s entry_timeout=2s
cfg_mux m failover slow
cfg_raw "[backend s]
type = s3
endpoint = $EP
bucket = $B
credentials_env = S3T"
cfg_faulty slow s
mount_smux "$T/slow/s3.conf" "$M" || { stop_s3; fail "mount over a faulty wrapper failed"; }
stat "$M/b" >/dev/null # looked up before the latency
echo "fault slow latency=2500ms" >"$M/.smux/ctl" || fail "fault slow latency"
ls "$M/b" >/dev/null
before=$(mark)
echo "fault slow off" >"$M/.smux/ctl" || fail "fault slow off"
cat "$M/b/f1" "$M/b/f2" >/dev/null
after=$(mark)
h=$(file_heads "$before" "$after")
[ -z "$h" ] || fail "cat of listed files the daemon's attributes had left sent HEADs: $(echo $h)"
nl=$(reqs_between "$before" "$after" | awk '$1 == "GET" && $2 ~ /list-type/' | wc -l)
[ "$nl" -eq 1 ] || fail "cat of two listed files the daemon's attributes had left listed $nl times (want 1)"
unmount_smux "$M"
log "open within the kernel's attributes, past the daemon's: the directory listed again, no HEAD"

# 3. Changed behind the mount: other content (no metadata: 0644, the
# mount's owner), and the same content put again with other metadata
# (LastModified moves, the ETag stays). s3rver keeps LastModified on a
# CopyObject in place, so s3fs's chmod (that copy) is checked on Swift's
# S3 API below.
printf 'A FILE 1\n' >"$T/f1.new"
awsc s3api put-object --bucket "$B" --key a/f1 --body "$T/f1.new" >/dev/null ||
	fail "put-object a/f1"
awsc s3api get-object --bucket "$B" --key a/f3 "$T/f3.body" >/dev/null ||
	fail "get-object a/f3"
sleep 1.1 # s3rver's LastModified has whole seconds
awsc s3api put-object --bucket "$B" --key a/f3 --body "$T/f3.body" \
	--metadata mode=33216,uid=4321,gid=8765,mtime=1500000000 >/dev/null ||
	fail "put-object a/f3 with other metadata"

mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
h=$(listed_heads "$T/got2" | sort | tr '\n' ' ')
[ "$h" = "/$B/a/f1 /$B/a/f3 " ] ||
	fail "ls -lR after changes behind the mount: HEADs of files '$h', want a/f1 and a/f3"
[ "$(stat -c '%a %s' "$M/a/f1")" = "644 9" ] ||
	fail "a/f1 rewritten behind the mount shows $(stat -c '%a %s' "$M/a/f1")"
[ "$(cat "$M/a/f1")" = "A FILE 1" ] || fail "a/f1 reads $(cat "$M/a/f1")"
[ "$(stat -c '%a %u %g %Y' "$M/a/f3")" = "700 4321 8765 1500000000" ] ||
	fail "a/f3 chmod-ed behind the mount shows $(stat -c '%a %u %g %Y' "$M/a/f3")"
# everything else as before
grep -v -e ' f1$' -e ' f3$' "$T/want" >"$T/want.rest"
grep -v -e ' f1$' -e ' f3$' "$T/got2" >"$T/got2.rest"
diff "$T/want.rest" "$T/got2.rest" || fail "other entries changed (above)"
unmount_smux "$M"

# ... and the HEADs refreshed the store: the next remount asks nothing
mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
h=$(listed_heads "$T/got3")
[ -z "$h" ] || fail "ls -lR after the HEADs refreshed the store sent: $(echo $h)"
diff "$T/got2" "$T/got3" || fail "ls -lR differs from the one before (above)"
log "changed behind the mount: each asked once with a HEAD, new attributes shown"
unmount_smux "$M"

# 4. A garbage file in place of the store: the mount goes on, the store
# is rebuilt (the listing asks with HEADs once, then no more).
head -c 8192 /dev/urandom >"$STORE"
rm -f "$STORE-wal" "$STORE-shm"
mount_smux "$CONF" "$M" || { stop_s3; fail "mount over a garbage store failed"; }
lsr >"$T/got4"
diff "$T/got3" "$T/got4" || fail "ls -lR over a garbage store differs (above)"
unmount_smux "$M"
mount_smux "$CONF" "$M" || { stop_s3; fail "remount failed"; }
before=$(mark)
lsr >/dev/null
after=$(mark)
h=$(file_heads "$before" "$after")
[ -z "$h" ] || fail "the rebuilt store did not serve: HEADs $(echo $h)"
unmount_smux "$M"
log "a garbage store is replaced and rebuilt"

# 5. attr_store = false: every file is asked, as before the store.
config "$T/off.conf" attr_store=false
mount_smux "$T/off.conf" "$M" || { stop_s3; fail "mount with attr_store = false failed"; }
before=$(mark)
lsr >"$T/got5"
after=$(mark)
n=$(file_heads "$before" "$after" | wc -l)
[ "$n" -ge $((2 * N)) ] || fail "attr_store = false: only $n HEADs of files"
diff "$T/got3" "$T/got5" || fail "ls -lR with attr_store = false differs (above)"
unmount_smux "$M"
log "attr_store = false: $n HEADs of files, as before"

stop_s3

# 6. s3fs's chmod behind the mount (a CopyObject in place, REPLACE
# metadata: the ETag stays, LastModified moves) on Swift's S3 API, which
# moves LastModified as S3 does: the new mode, owner and mtime show
# after a remount.
swift_server
SEP=$(sed -n 's/^S3_ENDPOINT=//p' "$SWIFT_DIR/env")
AK=$(sed -n 's/^S3_ACCESS_KEY=//p' "$SWIFT_DIR/env")
SK=$(sed -n 's/^S3_SECRET_KEY=//p' "$SWIFT_DIR/env")
SB=smux-attrs-$$-$RANDOM
swc() {
	AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK \
		AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "$SEP" "$@"
}
swc s3api create-bucket --bucket "$SB" >/dev/null || fail "create-bucket on Swift"
export SMUX_IT_SW_ACCESS_KEY_ID=$AK SMUX_IT_SW_SECRET_ACCESS_KEY=$SK
new_config "$T/sw.conf" s
cfg_raw "[backend s]
type = s3
endpoint = $SEP
bucket = $SB
region = us-east-1
credentials_env = SMUX_IT_SW"
mount_smux "$T/sw.conf" "$M" || fail "mount on Swift's S3 API failed"
mkdir "$M/c"
for i in 1 2 3; do printf 'swift %d\n' "$i" >"$M/c/f$i"; done
chmod 0640 "$M/c/f2"
ls -lRn --time-style=+%s "$M" >/dev/null # records LastModified
[ "$(stat -c %a "$M/c/f2")" = 640 ] || fail "c/f2 on Swift: mode $(stat -c %a "$M/c/f2")"
unmount_smux "$M"
sleep 1.1
swc s3api copy-object --bucket "$SB" --key c/f2 --copy-source "$SB/c/f2" \
	--metadata-directive REPLACE \
	--metadata mode=33216,uid=4321,gid=8765,mtime=1500000000 >/dev/null ||
	fail "copy-object c/f2 in place on Swift"
mount_smux "$T/sw.conf" "$M" || fail "remount on Swift's S3 API failed"
ls -lRn --time-style=+%s "$M" >"$T/sw.ls"
grep -Eq '^-rwx------ +1 +4321 +8765 +8 +1500000000 f2$' "$T/sw.ls" ||
	{ cat "$T/sw.ls" >&2; fail "c/f2 chmod-ed in place behind the mount: not shown (above)"; }
grep -Eq '^-rw-r--r-- +1 +[0-9]+ +[0-9]+ +8 +[0-9]+ f1$' "$T/sw.ls" ||
	{ cat "$T/sw.ls" >&2; fail "c/f1 on Swift (above)"; }
unmount_smux "$M"
log "a CopyObject in place with other metadata shows after a remount (Swift S3 API)"
log "the attribute cache serves listings after a remount and sees changes behind the mount"
