#!/usr/bin/env bash
# test_s3_apps.sh KIND - real programs on a `type = s3` mount, on the S3
# API of OpenStack Swift (s3api: strict SigV4, multipart) (issue 10):
#   - tail -f of a file another process appends to through the same mount
#     sees every appended line, as on a local filesystem;
#   - cp -a and rsync -a of a tree with modes, mtimes, symlinks and nested
#     directories onto the mount and back: diff -r, and stat's modes and
#     mtimes equal;
#   - git init, add, commit, log, status in a repository on the mount;
#   - kill -9 of the daemon in the middle of the upload of a large file
#     that replaces an older one: after a remount the object is the old
#     one whole or the new one whole, and no multipart upload is left on
#     the server (aws s3api list-multipart-uploads);
#   - SIGTERM of the daemon while a file is open for writing: a clean exit
#     (no leak under ASan).
# KIND: s3 (the s3 backend alone) or shield (a file origin + s3 mirror).
#
# Swift: the one `make check` started for every pass (SMUX_TEST_SERVERS),
# else one of its own under $T, stopped at the end also on failure.
. "$(dirname "$0")/lib.sh"

KIND=${1:-s3}
command -v aws >/dev/null || fail "aws CLI missing (scripts/install-deps.sh installs awscli)"
command -v rsync >/dev/null || fail "rsync missing (scripts/install-deps.sh)"

swift_server
SW=$SWIFT_DIR
EP=$(sed -n 's/^S3_ENDPOINT=//p' "$SW/env")
AK=$(sed -n 's/^S3_ACCESS_KEY=//p' "$SW/env")
SK=$(sed -n 's/^S3_SECRET_KEY=//p' "$SW/env")
B=smux-apps-$$-$RANDOM
log "$KIND: Swift S3 API at $EP, bucket $B"
awsc() {
	AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK \
		AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "$EP" "$@"
}
awsc s3api create-bucket --bucket "$B" >/dev/null
export SMUX_IT_S3APPS_ACCESS_KEY_ID=$AK SMUX_IT_S3APPS_SECRET_ACCESS_KEY=$SK

CONF=$T/apps.conf
new_config "$CONF" root
S3CFG="type = s3
endpoint = $EP
bucket = $B
region = us-east-1
prefix = apps
credentials_env = SMUX_IT_S3APPS
multipart_threshold = 8M"
case $KIND in
s3) cfg_raw "[backend root]
$S3CFG
" ;;
shield)
	cfg_mux root shield "origin s" backend_timeout=30s
	cfg_file origin "$T/origin"
	cfg_raw "[backend s]
$S3CFG
"
	;;
*) fail "unknown kind $KIND" ;;
esac
M=$T/mnt
mount_smux "$CONF" "$M"

# ---- tail -f of a file appended to through the same mount ----
# tail -F polls (no inotify on FUSE): it must see each line appended by
# another process while it follows the file.
: >"$M/log.txt"
tail -n +1 -F -s 0.1 "$M/log.txt" >"$T/tail.out" 2>"$T/tail.err" &
tail_pid=$!
for i in 1 2 3 4 5; do
	printf 'line %s\n' "$i" >>"$M/log.txt"
	for ((w = 0; w < 100; w++)); do
		grep -qx "line $i" "$T/tail.out" && break
		sleep 0.1
	done
	grep -qx "line $i" "$T/tail.out" ||
		{ kill "$tail_pid" 2>/dev/null; fail "tail -F did not see line $i: $(cat "$T/tail.out" "$T/tail.err")"; }
done
kill "$tail_pid" 2>/dev/null || true
wait "$tail_pid" 2>/dev/null || true
log "$KIND: tail -F saw the 5 lines appended through the mount"

# ---- cp -a and rsync -a onto the mount and back ----
S=$T/src
mkdir -p "$S/a/b/c" "$S/empty"
printf 'one\n' >"$S/a/one.txt"
printf 'two\n' >"$S/a/b/two.txt"
head -c 70000 /dev/urandom >"$S/a/b/c/bin.dat"
printf '#!/bin/sh\necho hi\n' >"$S/a/run.sh"
chmod 755 "$S/a/run.sh"
chmod 600 "$S/a/one.txt"
chmod 640 "$S/a/b/two.txt"
chmod 750 "$S/a/b"
ln -s one.txt "$S/a/link"
ln -s ../../a "$S/a/b/uplink"
touch -h -d '2020-01-02 03:04:05' "$S/a/link"
touch -d '2019-05-06 07:08:09' "$S/a/one.txt" "$S/a/b/c/bin.dat"
touch -d '2018-01-01 00:00:00' "$S/a/b/c" "$S/a/b" "$S/empty"

# stat of every entry (type, mode, size, mtime, link target) sorted by path;
# directories' sizes and symlinks' modes are not compared
statlist() {
	(cd "$1" && find . -mindepth 1 | sort | while read -r p; do
		if [ -L "$p" ]; then
			printf '%s l %s %s\n' "$p" "$(stat -c %Y "$p")" "$(readlink "$p")"
		elif [ -d "$p" ]; then
			printf '%s d %s %s\n' "$p" "$(stat -c %a "$p")" "$(stat -c %Y "$p")"
		else
			printf '%s f %s %s %s\n' "$p" "$(stat -c %a "$p")" "$(stat -c %s "$p")" "$(stat -c %Y "$p")"
		fi
	done)
}
statlist "$S" >"$T/st.src"
same_tree() { # what: DIR
	diff -r --no-dereference "$S" "$2" >"$T/diff" 2>&1 ||
		fail "$KIND: $1: trees differ: $(head -5 "$T/diff")"
	statlist "$2" >"$T/st.cmp"
	diff "$T/st.src" "$T/st.cmp" >"$T/diff" ||
		fail "$KIND: $1: modes/mtimes differ: $(head -8 "$T/diff")"
}

cp -a "$S" "$M/cpa"
same_tree "cp -a onto the mount" "$M/cpa"
cp -a "$M/cpa" "$T/cpa.back"
same_tree "cp -a back from the mount" "$T/cpa.back"
rsync -a "$S/" "$M/rs/"
same_tree "rsync -a onto the mount" "$M/rs"
rsync -a "$M/rs/" "$T/rs.back/"
same_tree "rsync -a back from the mount" "$T/rs.back"
# a second rsync has nothing to do: sizes and mtimes on the mount are kept
n=$(rsync -a --itemize-changes "$S/" "$M/rs/" | wc -l)
[ "$n" = 0 ] || fail "$KIND: a second rsync -a changed $n entries"
log "$KIND: cp -a and rsync -a onto the mount and back keep data, modes, mtimes, symlinks"

# ---- git ----
G=$M/repo
mkdir "$G"
# no template: git's sample hooks are a dozen more objects to create
git -C "$G" init -q --template= || fail "$KIND: git init"
printf 'hello\n' >"$G/README"
mkdir "$G/src"
printf 'int main(void) { return 0; }\n' >"$G/src/main.c"
git -C "$G" add -A || fail "$KIND: git add"
git -C "$G" -c user.name=t -c user.email=t@example.org commit -q -m first ||
	fail "$KIND: git commit"
[ "$(git -C "$G" log --format=%s)" = first ] ||
	fail "$KIND: git log: $(git -C "$G" log --oneline 2>&1)"
[ "$(git -C "$G" show HEAD:src/main.c)" = 'int main(void) { return 0; }' ] ||
	fail "$KIND: git show of the committed file"
[ -z "$(git -C "$G" status --porcelain)" ] || fail "$KIND: git status not clean"
log "$KIND: git init, add, commit, log, status on the mount"

# ---- kill -9 in the middle of a large upload ----
# The old object (12 MiB) is replaced by a new one of 40 MiB, a multipart
# upload of 8 MiB parts at close; the daemon is killed as soon as a part
# has landed (Swift's s3api keeps parts in the container BUCKET+segments,
# polled through the Swift API: the aws CLI is too slow to poll) and
# before the upload completes (the upload must still be listed). After a
# remount the object is the old one or the new one, whole, and the upload
# the killed daemon left is aborted.
mpus() {
	awsc s3api list-multipart-uploads --bucket "$B" \
		--query 'Uploads[].Key' --output text 2>/dev/null | grep -v '^None$' || true
}
SWURL=${EP}/auth/v1.0
curl -fsS -D "$T/auth.h" -o /dev/null -H "X-Auth-User: $AK" -H "X-Auth-Key: $SK" "$SWURL" ||
	fail "$KIND: Swift auth"
TOK=$(tr -d '\r' <"$T/auth.h" | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p')
STURL=$(tr -d '\r' <"$T/auth.h" | sed -n 's/^[Xx]-[Ss]torage-[Uu]rl: //p')
segments() { curl -s -H "X-Auth-Token: $TOK" "$STURL/$B+segments" 2>/dev/null | grep -c . || true; }
head -c $((12 * 1024 * 1024)) /dev/urandom >"$T/old"
cp "$T/old" "$M/big"
cmp "$T/old" "$M/big"
killed=0
for try in 1 2 3; do
	head -c $((40 * 1024 * 1024)) /dev/urandom >"$T/new"
	base=$(segments)
	cp "$T/new" "$M/big" 2>/dev/null &
	cp_pid=$!
	while kill -0 "$cp_pid" 2>/dev/null; do
		[ "$(segments)" -gt "$base" ] && break
	done
	crash_smux "$M"
	wait "$cp_pid" 2>/dev/null || true
	if [ -n "$(mpus)" ]; then
		killed=1
		break
	fi
	log "$KIND: try $try: the upload completed before the kill; again"
	mount_smux "$CONF" "$M"
	cmp "$T/new" "$M/big" || fail "$KIND: a completed upload does not read back"
	cp "$T/new" "$T/old"
done
[ "$killed" = 1 ] || fail "$KIND: never killed the daemon in the middle of an upload"
log "$KIND: killed the daemon with a multipart upload in flight: $(mpus)"
mount_smux "$CONF" "$M"
cmp -s "$T/old" "$M/big" || cmp -s "$T/new" "$M/big" ||
	fail "$KIND: after kill -9 big is neither the old nor the new file ($(stat -c %s "$M/big") bytes)"
# the remount aborts what the killed daemon left on the server: wait
# (bounded) for its journal of uploads in flight to empty, then ask the
# server once (the aws CLI takes seconds per call here)
journal() { find "$T/state" -path '*/s3-uploads/*' -type f 2>/dev/null | wc -l; }
for ((w = 0; w < 300; w++)); do
	[ "$(journal)" = 0 ] && break
	sleep 0.1
done
left=$(mpus)
[ -z "$left" ] || fail "$KIND: multipart uploads left after kill -9 and a remount: $left"
log "$KIND: kill -9 mid-upload: big is whole, no multipart upload left"

# what was written before the crash is all there
same_tree "after the crash" "$M/rs"

# SIGTERM while a program holds a file open for writing: the daemon
# commits it, unmounts and exits 0, and frees the handle the kernel never
# released (under ASan a leak fails the test here)
exec 3>"$M/held"
printf 'held\n' >&3
pid=
for e in "${_SMUX_FG_PIDS[@]}"; do
	IFS=: read -r p m _ <<<"$e"
	[ "$m" = "$M" ] && pid=$p
done
[ -n "$pid" ] || fail "$KIND: no daemon for $M"
kill -TERM "$pid"
_smux_wait_pid "$pid" 60 || fail "$KIND: the daemon did not exit on SIGTERM"
exec 3>&-
unmount_smux "$M" # its exit status and sanitizer reports
log "$KIND: ok"
