#!/usr/bin/env bash
# test_swift_requests.sh - how many Swift requests single file operations
# cost through a mount of one swift backend (issue 12): create,
# overwrite, stat, unlink, rename, ls -l, cat, untar of new files (no
# HEAD of a file) and rm -r after a remount (no HEAD of a file). Counts come from the
# Swift proxy's log (tests/servers/swift.sh: DIR/log/proxy.log), the
# client's requests only (a request the proxy makes for itself, e.g. the
# copy middleware's GET, has "-" as its client address), and only those
# on this test's container (make check's Swift serves other tests at
# the same time). After each operation the test sends a marker request
# (a HEAD of an object never there) and waits (bounded) until the proxy
# logged it: the proxy logs a request when its answer is sent, and the
# daemon's requests of the operation were answered before the command
# returned.
#
# The kernel keeps no names (entry and negative timeouts 0): every path
# component of every operation is a LOOKUP the daemon answers, so the
# counts do not depend on timing and show the daemon's own caches.
# A count above its bound fails the test; the counts are printed.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/req_log.sh"
CONTAINER=req-$$-$RANDOM
start_logged_swift

CONF=$T/swift.conf
new_config "$CONF" s attr_timeout=3600 entry_timeout=0 negative_timeout=0
cfg_raw "[backend s]
type = swift
auth_url = $SWIFT_AUTH_URL
container = $CONTAINER
credentials_env = SMUX_IT_SWIFT_CRED
"
M=$T/mnt
mount_smux "$CONF" "$M"

FAILS=0
NTAR=8
RESULTS=()
# op NAME MAX CMD...: runs CMD, counts its requests, fails above MAX.
op() {
	local name=$1 max=$2 before after n what
	shift 2
	before=$(mark)
	"$@"
	after=$(mark)
	n=$((after - before - 1))
	what=$(reqs | sed -n "$((before + 2)),$((after))p" |
		awk '{ k = $1; if ($3 == "404") k = k "(404)"; c[k]++ }
			END { for (k in c) printf "%s %s ", k, c[k] }')
	OP_REQS=$(reqs | sed -n "$((before + 2)),$((after))p")
	[ -n "${DEBUG_REQS:-}" ] && printf '%s\n' "$OP_REQS" | sed "s|^|  $name: |" >&2
	RESULTS+=("$(printf '%-26s %3d  (bound %d)  %s' "$name" "$n" "$max" "$what")")
	if [ "$n" -gt "$max" ]; then
		log "$name: $n requests, more than $max: $what"
		FAILS=$((FAILS + 1))
	fi
}

mkdir "$M/d"
for i in 1 2 3 4 5; do printf 'content %d\n' "$i" >"$M/d/f$i"; done
mkdir "$M/d/sub"

# The daemon's own requests come first in each count: a LOOKUP is a HEAD
# (a 404 also lists "key/" for a directory), an open or getattr of a
# file another HEAD. The backend's: a create is the daemon's empty PUT
# (with "If-None-Match: *", no HEAD: the create saw the key absent) and
# the PUT of the content, without the HEAD that looks for an old large
# object's segments (the backend just put that key as a plain object:
# swift_absent.c); an overwrite and an unlink of a key the backend put
# need no such HEAD either while that note holds (10 s: on a loaded
# machine the steps between may take longer, so their bounds allow the
# HEAD: overwrite 4, unlink 2 requests measured); rename HEADs both
# names (segments), then COPY (PUT + X-Copy-From, its answer's ETag is
# the new object's: no HEAD after it) and DELETE.
op "create d/new (printf >)" "${BOUND_CREATE:-3}" sh -c "printf x >'$M/d/new'"
op "overwrite d/f1 (printf >)" "${BOUND_OVERWRITE:-5}" sh -c "printf 'new 1\n' >'$M/d/f1'"
op "stat d/f2" "${BOUND_STAT:-1}" stat "$M/d/f2" >/dev/null
op "unlink d/new" "${BOUND_UNLINK:-3}" rm "$M/d/new"
# (rm just changed d: mv's LOOKUP of d asks again, a HEAD and a list)
op "rename d/f3 d/g3" "${BOUND_RENAME:-10}" mv "$M/d/f3" "$M/d/g3"
op "ls -l d (5 files, 1 dir)" "${BOUND_LS:-13}" ls -l "$M/d" >/dev/null
op "cat d/f4" "${BOUND_CAT:-3}" cat "$M/d/f4" >/dev/null

# no_file_heads NAME: fails when the last op sent a HEAD of a file of
# u/x/y (the untarred tree), whatever its answer
no_file_heads() {
	local h
	h=$(printf '%s\n' "$OP_REQS" | awk '$1 == "HEAD" && $2 ~ /\/u\/x\/y\/t[0-9]+$/')
	if [ -n "$h" ]; then
		log "$1 sent HEADs of files: $(printf '%s\n' "$h" | head -n 3 | tr '\n' ' ')"
		FAILS=$((FAILS + 1))
	fi
}

# untar of new files into a new directory: the daemon made the directory
# and knows its names, so no LOOKUP asks Swift; the put of a name the
# create saw absent is conditional ("If-None-Match: *"), not preceded by
# a HEAD looking for an old large object's segments (answered 404)
mkdir -p "$T/src/x/y"
for i in $(seq 1 "$NTAR"); do printf 'tar file %d\n' "$i" >"$T/src/x/y/t$i"; done
tar -cf "$T/tree.tar" -C "$T/src" x
mkdir "$M/u"
op "untar $NTAR files" "${BOUND_UNTAR:-$((NTAR + 25))}" tar -xf "$T/tree.tar" -C "$M/u"
no_file_heads "untar"

# (the bounds of both: 30 requests measured, 38 with a HEAD per file, a
# little room for the kernel's lookups of the directories)

# rm -r after a remount: the listing shows each file as the version this
# backend put (the attribute cache matches it), a plain object, so its
# DELETE needs no HEAD for a large object's segments first
unmount_smux "$M"
mount_smux "$CONF" "$M"
op "rm -r u ($NTAR files)" "${BOUND_RMR:-$((NTAR + 25))}" rm -r "$M/u"
no_file_heads "rm -r"
# the unlinks go in bulk deletes (delq.c, swift_bulk.c), POSTs to the
# account (reqs shows the container's requests only): at most the first
# alone (its batch leaves at once), no DELETE for the rest
nfdel=$(printf '%s\n' "$OP_REQS" | awk '$1 == "DELETE" && $2 ~ /\/t[0-9]+$/' | wc -l)
ndel=$(stats "$M" .deleteQueue.deleted)
[ "$nfdel" -le 1 ] && [ "$ndel" -ge "$NTAR" ] ||
	fail "rm -r of $NTAR files: $nfdel DELETEs of files, $ndel deleted by the queue"

# what the operations did is what a local filesystem shows
[ ! -e "$M/d/new" ] || fail "d/new still there after rm"
[ ! -e "$M/u" ] || fail "u still there after rm -r"
[ "$(cat "$M/d/f1")" = "new 1" ] || fail "d/f1 not overwritten"
[ ! -e "$M/d/f3" ] || fail "d/f3 still there after mv"
[ "$(cat "$M/d/g3")" = "content 3" ] || fail "d/g3 reads wrong"
# and what Swift holds, asked directly
want_obj() {
	local got
	got=$(curl -sf -H "X-Auth-Token: $TOKEN" "$SURL/$CONTAINER/$1") ||
		fail "swift has no $1"
	[ "$got" = "$2" ] || fail "swift's $1 is \"$got\", not \"$2\""
}
want_obj d/g3 "content 3"
want_obj d/f1 "new 1"
code=$(curl -s -o /dev/null -w '%{http_code}' -I -H "X-Auth-Token: $TOKEN" \
	"$SURL/$CONTAINER/d/f3")
[ "$code" = 404 ] || fail "swift still has d/f3 ($code)"
left=$(curl -sf -H "X-Auth-Token: $TOKEN" "$SURL/$CONTAINER?prefix=u/") ||
	fail "cannot list the container"
[ -z "$left" ] || fail "swift still holds under u/: $(echo $left)"

unmount_smux "$M"
printf '%s\n' "${RESULTS[@]}" >&2
[ "$FAILS" = 0 ] || fail "$FAILS operations sent more requests than their bound"
log "request counts within their bounds"
