#!/usr/bin/env bash
# test_apps.sh KIND - programs that rely on local-filesystem semantics, on
# a file backend (file), a mirror of two (mirror) and a failover of two
# (failover) (issue 8, "Done when"):
#   - git: clone of a real repository (this one), gc, a commit, fsck;
#   - sqlite3: 1000 autocommit inserts in rollback-journal and WAL mode,
#     integrity_check ok, the rows all there after a remount;
#   - make -j2 building a few C programs on the mount with its output
#     going to a log on the mount.
# For mirror, the replicas are compared at the end (diff -r).
. "$(dirname "$0")/lib.sh"

KIND=${1:-file}
m=$T/mnt
A=$T/a
B=$T/b

new_config "$T/apps.conf" root
case $KIND in
file) cfg_file root "$A" ;;
mirror | failover)
	cfg_mux root "$KIND" "a b"
	cfg_file a "$A"
	cfg_file b "$B"
	;;
*) fail "unknown kind $KIND" ;;
esac
mount_smux "$T/apps.conf" "$m"

log "$KIND: git clone, gc, commit, fsck"
git clone -q --no-hardlinks "$SMUX_REPO" "$m/repo" || fail "$KIND: git clone"
git -C "$m/repo" gc -q || fail "$KIND: git gc"
echo "change" >>"$m/repo/README.md"
git -C "$m/repo" -c user.name=t -c user.email=t@example.org \
	commit -q -am "a change on the mount" || fail "$KIND: git commit"
git -C "$m/repo" fsck --no-progress 2>"$T/fsck.err" ||
	fail "$KIND: git fsck: $(head -5 "$T/fsck.err")"
[ -z "$(git -C "$m/repo" status --porcelain)" ] || fail "$KIND: git status not clean"

for jm in delete wal; do
	log "$KIND: sqlite3 ($jm journal), 1000 autocommit inserts"
	db=$m/t-$jm.db
	{
		echo "PRAGMA journal_mode=$jm;"
		echo "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
		for i in $(seq 1 1000); do
			echo "INSERT INTO t (v) VALUES ('row $i');"
		done
	} | sqlite3 "$db" >/dev/null || fail "$KIND: sqlite3 $jm inserts"
	[ "$(sqlite3 "$db" 'SELECT count(*) FROM t;')" = 1000 ] ||
		fail "$KIND: sqlite3 $jm: row count"
	[ "$(sqlite3 "$db" 'PRAGMA integrity_check;')" = ok ] ||
		fail "$KIND: sqlite3 $jm: integrity_check"
done

log "$KIND: make -j2 with its output logged on the mount"
mkdir "$m/build"
for i in 1 2 3 4; do
	printf '#include <stdio.h>\nint main(void){puts("prog %s");return 0;}\n' \
		"$i" >"$m/build/p$i.c"
done
printf 'all: p1 p2 p3 p4\np%%: p%%.c\n\t$(CC) -O0 -o $@ $<\n\t@echo built $@\n' \
	>"$m/build/Makefile"
make -C "$m/build" -j2 >"$m/build/build.log" 2>&1 ||
	fail "$KIND: make -j2: $(tail -5 "$m/build/build.log")"
for i in 1 2 3 4; do
	[ "$("$m/build/p$i")" = "prog $i" ] || fail "$KIND: p$i does not run"
	grep -qx "built p$i" "$m/build/build.log" || fail "$KIND: build.log lacks p$i"
done

unmount_smux "$m"
mount_smux "$T/apps.conf" "$m"
for jm in delete wal; do
	[ "$(sqlite3 "$m/t-$jm.db" 'SELECT count(*) FROM t;')" = 1000 ] ||
		fail "$KIND: sqlite3 $jm: rows after a remount"
done
git -C "$m/repo" fsck --no-progress 2>/dev/null || fail "$KIND: git fsck after a remount"
unmount_smux "$m"

if [ "$KIND" = mirror ]; then
	diff -r "$A" "$B" >"$T/diff" 2>&1 || fail "mirror: replicas differ: $(head -5 "$T/diff")"
fi
log "$KIND: ok"
