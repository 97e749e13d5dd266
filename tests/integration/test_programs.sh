#!/usr/bin/env bash
# test_programs.sh MODE - unmodified programs on a mount of one mux in MODE
# over local file backends, then the backing directories hold exactly what
# the mode promises (DESIGN section 3):
#   failover       first backend holds everything, the second nothing
#   round-robin    two members over ONE directory (a pool of identical
#   weighted       replicas, modelled honestly): the tree is in it, reads
#                  were spread over both members (weighted: by weight)
#   sticky-by-key  each file on exactly one shard, the one fnv1a(key) % 3
#                  picks; `ls` through the mount shows the union
#   shield         origin and every mirror hold the whole tree
#   mirror         every replica holds the whole tree
#   cdn-shield     shield of a file origin and two CDN storage mirrors on
#                  loopback servers (lib.sh net_config): swift through the
#                  identity v2.0 emulator in front of OpenStack Swift, and
#                  bunny on the Bunny Storage emulator; once the hints
#                  have drained, the origin, the Swift container (read
#                  with swift download) and the Bunny zone (read with
#                  curl from the emulator) hold the whole tree byte for
#                  byte (a smaller tree and a 64 MiB dd: Swift's Python
#                  servers take ~30 ms a request here)
# Finally a fresh daemon mounts the same backends and shows the same tree.
. "$(dirname "$0")/lib.sh"

MODE=${1:?usage: test_programs.sh MODE}
M=$T/mnt
S=$T/src
CONF=$T/$MODE.conf

NET=0
case $MODE in cdn-shield) NET=1 ;; esac
if [ "$NET" = 1 ]; then
	net_config "$MODE" "$CONF"
	BIG_MB=${SMUX_IT_BIG_MB:-64}
	NDIRS=10 NFILES=8
else
	mode_config "$MODE" "$CONF"
	BIG_MB=${SMUX_IT_BIG_MB:-256}
	NDIRS=20 NFILES=10
fi
BACKING=$(mode_backing_dirs "$CONF")

# check_file REL LOCALFILE: where the mode puts REL, equal to LOCALFILE
# (a network shield: on the origin; its mirrors are checked at the end,
# once their copies, sent in parallel, have all landed)
check_file() {
	if [ "$NET" = 1 ]; then
		cmp "$2" "$T/origin/$1" || fail "$1 missing or different on the origin"
	else
		mode_check_file "$MODE" "$1" "$2"
	fi
}

# bunny_list DIR REL CFG: the Bunny zone's files under REL, read over HTTP
# from the emulator as any client would (GET dir/ lists a directory as
# JSON), as curl config entries (url, output under DIR) appended to CFG;
# DIR gets the zone's directories
bunny_list() {
	local out=$1 rel=$2 cfg=$3 key name isdir list path
	key=$(cat "$T/bn/key")
	mkdir -p "$out/$rel"
	list=$(curl -sf -H "AccessKey: $key" "$BUNNY_URL/edge/${rel:+$rel/}") ||
		fail "bunny: cannot list /${rel}"
	while IFS=$'\t' read -r isdir name; do
		path=${rel:+$rel/}$name
		if [ "$isdir" = true ]; then
			bunny_list "$out" "$path" "$cfg"
		else
			path=${path//\\/\\\\}
			path=${path//\"/\\\"}
			printf 'url = "%s/edge/%s"\noutput = "%s/%s"\n' \
				"$BUNNY_URL" "$path" "$out" "$path" >>"$cfg"
		fi
	done < <(jq -r '.[] | "\(.IsDirectory)\t\(.ObjectName)"' <<<"$list")
}

# bunny_fetch DIR: every file of the Bunny zone into DIR, by one curl
# (parallel transfers; a file it could not read is missing or short, which
# net_check_copies sees)
bunny_fetch() {
	local out=$1 cfg=$T/bunny-fetch.cfg
	: >"$cfg"
	bunny_list "$out" "" "$cfg"
	[ -s "$cfg" ] || return 0
	curl -sf --no-progress-meter --parallel --parallel-max 8 -H "AccessKey: $(cat "$T/bn/key")" \
		-K "$cfg" || fail "bunny: cannot read every file (curl exit $?)"
}

# net_check_copies SNAP: the origin holds SNAP's tree; the Swift container
# and the Bunny zone, fetched by their own clients, hold its files byte
# for byte and no other file
net_check_copies() {
	local snap=$1 d rel
	diff -r -x .smuxfs-tmp "$snap" "$T/origin" ||
		fail "the origin differs from the mount's tree"
	[ -z "$(ls -A "$T/origin/.smuxfs-tmp")" ] ||
		fail "temp files left in the origin's .smuxfs-tmp"
	mkdir -p "$T/swcopy" "$T/bncopy"
	(cd "$T/swcopy" && "${SWIFT_RACK[@]}" download "$SWIFT_CONTAINER")
	bunny_fetch "$T/bncopy"
	(cd "$snap" && find . -type f | sort) >"$T/files.want"
	for d in "$T/swcopy" "$T/bncopy"; do
		(cd "$d" && find . -type f | sort) >"$T/files.got"
		diff "$T/files.want" "$T/files.got" ||
			fail "$d holds another set of files than the mount"
		(cd "$snap" && xargs -d '\n' sha256sum -- <"$T/files.want") \
			>"$T/files.sum" || fail "cannot hash the mount's snapshot"
		(cd "$d" && sha256sum --quiet -c "$T/files.sum") ||
			fail "$d holds other content than the mount (above)"
	done
	# the Bunny zone has real directories: the same ones
	(cd "$snap" && find . -mindepth 1 -type d | sort) >"$T/dirs.want"
	(cd "$T/bncopy" && find . -mindepth 1 -type d | sort) >"$T/dirs.got"
	diff "$T/dirs.want" "$T/dirs.got" ||
		fail "the Bunny zone holds other directories than the mount"
	log "origin, Swift and Bunny hold the mount's $(wc -l <"$T/files.want") files byte for byte"
}

# check_backing SNAP: the backing directories against a snapshot of the tree.
check_backing() {
	local snap=$1 d rel n found
	case $MODE in
	sticky-by-key)
		# every file on exactly its shard, nothing else anywhere
		while IFS= read -r rel; do
			mode_check_file "$MODE" "$rel" "$snap/$rel"
		done < <(cd "$snap" && find . -type f | sed 's|^\./||')
		for d in 0 1 2; do
			while IFS= read -r rel; do
				[ -f "$snap/$rel" ] || fail "s$d has $rel, which the mount does not show"
			done < <(cd "$T/s$d" && find . -type f | sed 's|^\./||')
			# (the file backend's work folder is no part of the tree)
			while IFS= read -r rel; do
				[ -d "$snap/$rel" ] || fail "s$d has directory $rel, which the mount does not show"
			done < <(cd "$T/s$d" && find . -mindepth 1 -type d ! -path ./.smuxfs-tmp | sed 's|^\./||')
		done
		# every directory the mount shows exists on some shard
		while IFS= read -r rel; do
			found=0
			for d in 0 1 2; do
				if [ -d "$T/s$d/$rel" ]; then found=1; fi
			done
			[ "$found" = 1 ] || fail "directory $rel is on no shard"
		done < <(cd "$snap" && find . -mindepth 1 -type d | sed 's|^\./||')
		for d in 0 1 2; do
			n=$(count_files "$T/s$d")
			log "shard s$d holds $n files"
			[ "$n" -gt 0 ] || fail "shard s$d holds no file: no sharding"
		done
		;;
	*)
		for d in $(mode_full_copies "$MODE"); do
			# the file backend's work folder is no part of the tree
			diff -r -x .smuxfs-tmp "$snap" "$d" ||
				fail "$d differs from the mount's tree"
			[ -z "$(ls -A "$d/.smuxfs-tmp")" ] ||
				fail "temp files left in $d/.smuxfs-tmp"
		done
		if [ "$MODE" = failover ]; then
			n=$(find "$T/b" -mindepth 1 ! -name .smuxfs-tmp | wc -l)
			[ "$n" -eq 0 ] || fail "standby b holds $n entries while a was healthy"
		fi
		;;
	esac
}

# --- sources -----------------------------------------------------------------
mkdir -p "$S"
printf 'hello smuxfs\nsecond line\n' >"$S/small.txt"
head -c $((3 * 1024 * 1024)) /dev/urandom >"$S/mid1.bin"
head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$S/mid2.bin"
make_tree "$S/tree" "$NDIRS" "$NFILES" # 200 files + extras (local)
tar -C "$S" -cf "$T/tree.tar" tree

mount_smux "$CONF" "$M"

# --- cp, cat ------------------------------------------------------------------
log "cp, cat"
cp "$S/small.txt" "$S/mid1.bin" "$S/mid2.bin" "$M/"
for f in small.txt mid1.bin mid2.bin; do
	cmp "$S/$f" "$M/$f"
done
[ "$(cat "$M/small.txt")" = "$(cat "$S/small.txt")" ]
cat "$S/small.txt" >>"$M/small.txt" # append through the shell
cat "$S/small.txt" "$S/small.txt" | cmp - "$M/small.txt"
check_file mid2.bin "$S/mid2.bin"

# --- mkdir -p, ls -lR ---------------------------------------------------------
log "mkdir -p, ls -lR"
mkdir -p "$M/deep/a/b/c"
[ -d "$M/deep/a/b/c" ]
echo x >"$M/deep/a/b/c/x.txt"
ls -lR "$M" >"$T/ls.out"
for n in small.txt mid1.bin mid2.bin deep a b c x.txt; do
	grep -q " $n\$" "$T/ls.out" || fail "ls -lR does not show $n"
done
grep -q " $((5 * 1024 * 1024 + 123)) .* mid2.bin\$" "$T/ls.out" ||
	fail "ls -l size of mid2.bin"

# --- mv -----------------------------------------------------------------------
log "mv file, mv directory, mv over a file"
mv "$M/mid1.bin" "$M/deep/moved.bin"
[ ! -e "$M/mid1.bin" ] || fail "mv left the source"
cmp "$S/mid1.bin" "$M/deep/moved.bin"
mv "$M/deep/a" "$M/deep/a2"
[ ! -e "$M/deep/a" ] || fail "mv of a directory left the source"
[ "$(cat "$M/deep/a2/b/c/x.txt")" = x ]
cp "$S/mid2.bin" "$M/victim"
cp "$S/small.txt" "$M/newer"
mv "$M/newer" "$M/victim"
cmp "$S/small.txt" "$M/victim"
[ ! -e "$M/newer" ]

# --- rm -r --------------------------------------------------------------------
log "rm -r"
cp -r "$S/tree/d0" "$M/rmme"
diff -r "$S/tree/d0" "$M/rmme"
mkdir -p "$M/rmme/x/y/z"
rm -r "$M/rmme"
[ ! -e "$M/rmme" ] || fail "rm -r left rmme"
ls "$M" >"$T/ls-after-rm"
! grep -qx rmme "$T/ls-after-rm" || fail "ls still shows rmme"

# --- tar ----------------------------------------------------------------------
log "tar extract into the mount, tar create from it"
tar -C "$M" -xf "$T/tree.tar"
diff -r "$S/tree" "$M/tree"
tar -C "$M" -cf "$T/out.tar" tree
mkdir "$T/untar"
tar -C "$T/untar" -xf "$T/out.tar"
diff -r "$S/tree" "$T/untar/tree"

# --- rsync --------------------------------------------------------------------
log "rsync -a in and out"
rsync -a "$S/tree/" "$M/rs/"
diff -r "$S/tree" "$M/rs"
cp -a "$S/tree" "$T/tree2" # keep mtimes: the next rsync sends only changes
echo changed >>"$T/tree2/d3/f3.dat"
rm "$T/tree2/d4/f4.dat"
head -c 20000 /dev/urandom >"$T/tree2/d5/new.dat"
rsync -a --delete --itemize-changes "$T/tree2/" "$M/rs/" >"$T/rsync.items"
diff -r "$T/tree2" "$M/rs"
# only the two changed files travel: the first pass kept every mtime
n=$(grep -c '^>f' "$T/rsync.items") || true
[ "$n" -eq 2 ] || { cat "$T/rsync.items" >&2; fail "rsync sent $n files, want 2"; }
rsync -a "$M/rs/" "$T/rsout/"
diff -r "$T/tree2" "$T/rsout"
# a second pass has nothing to transfer
n=$(rsync -a --itemize-changes "$M/rs/" "$T/rsout/" | wc -l)
[ "$n" -eq 0 ] || fail "rsync out again transferred $n items (mtimes not kept?)"

# --- dd of a large file --------------------------------------------------------
log "dd ${BIG_MB} MiB"
head -c $((BIG_MB * 1024 * 1024)) /dev/urandom >"$T/big"
dd if="$T/big" of="$M/big.bin" bs=1M conv=fsync status=none
[ "$(stat -c %s "$M/big.bin")" -eq $((BIG_MB * 1024 * 1024)) ]
cmp "$T/big" "$M/big.bin"
check_file big.bin "$T/big"
rm "$M/big.bin" "$T/big"
[ ! -e "$M/big.bin" ]

# --- git ----------------------------------------------------------------------
log "git init/add/commit/log"
mkdir "$M/repo"
cp -r "$S/tree/d1" "$S/tree/d2" "$S/small.txt" "$M/repo/"
(
	cd "$M/repo"
	export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org \
		GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org
	git init -q
	git add -A
	git commit -q -m first
	echo more >>small.txt
	git rm -q -r d2
	git add -A
	git commit -q -m second
	[ "$(git log --oneline | wc -l)" -eq 2 ]
	git log --format=%s | tr '\n' ' ' | grep -qx 'second first '
	[ -z "$(git status --porcelain)" ]
	git fsck --full --no-progress 2>&1
	git show HEAD~1:small.txt | cmp - "$S/small.txt"
)

# --- sqlite3 ------------------------------------------------------------------
log "sqlite3"
sqlite3 "$M/db.sqlite" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO t(v) SELECT printf('row %d %s', i, hex(randomblob(20))) FROM n;
COMMIT;
SQL
[ "$(sqlite3 "$M/db.sqlite" 'SELECT count(*) FROM t;')" = 1000 ]
sqlite3 "$M/db.sqlite" "UPDATE t SET v = v || '!' WHERE id % 7 = 0;
	DELETE FROM t WHERE id > 900;"
[ "$(sqlite3 "$M/db.sqlite" "SELECT count(*) FROM t WHERE v LIKE '%!';")" = 128 ]
[ "$(sqlite3 "$M/db.sqlite" 'SELECT count(*) FROM t;')" = 900 ]
[ "$(sqlite3 "$M/db.sqlite" 'PRAGMA integrity_check;')" = ok ]
[ ! -e "$M/db.sqlite-journal" ] || fail "sqlite journal left behind"

# --- stats --------------------------------------------------------------------
log "stats"
[ "$(stats "$M" .mode)" = "${MODE#cdn-}" ] || fail "stats mode $(stats "$M" .mode)"
down=$(stats "$M" '[.backends[] | select(.status != "up") | .name] | join(" ")')
[ -z "$down" ] || fail "healthy backends reported not up: $down"
case $MODE in
round-robin | weighted)
	h1=$(stats "$M" '.backends[0].hits')
	h2=$(stats "$M" '.backends[1].hits')
	log "hits: $h1 / $h2"
	[ "$h1" -gt 0 ] && [ "$h2" -gt 0 ] || fail "one member got no calls ($h1/$h2)"
	if [ "$MODE" = round-robin ]; then
		[ $((h1 * 4)) -ge $((h1 + h2)) ] && [ $((h2 * 4)) -ge $((h1 + h2)) ] ||
			fail "round-robin split $h1/$h2 is not even"
	else
		[ "$h1" -gt "$h2" ] || fail "weight 3 member got $h1 hits, weight 1 got $h2"
	fi
	;;
esac

# --- backing directories -------------------------------------------------------
log "backing directories"
snapshot "$M" "$T/snap"
[ -f "$T/snap/tree/d7/f7.dat" ] && [ -f "$T/snap/db.sqlite" ]
if [ "$NET" = 1 ]; then
	# the mirrors' copies land in parallel with the origin's; a copy
	# that missed a write is hinted: the hints drain (repair forces the
	# replay) before the mirrors are read
	end=$((SECONDS + 120))
	while h=$(stats "$M" .pendingHints) && [ "$h" -ne 0 ]; do
		[ "$SECONDS" -lt "$end" ] || fail "pendingHints still $h after 120 s"
		echo repair >"$M/.smux/ctl" 2>/dev/null || true
		sleep 0.5
	done
fi
unmount_smux "$M"
if [ "$NET" = 1 ]; then
	net_check_copies "$T/snap"
	BACKING="$BACKING $T/swcopy $T/bncopy"
else
	check_backing "$T/snap"
fi
for d in $BACKING; do
	[ -z "$(find "$d" -name .smux)" ] || fail ".smux appeared in $d"
done

log "a fresh daemon shows the same tree"
mount_smux "$CONF" "$M"
diff -r -x .smux "$T/snap" "$M"
[ "$(sqlite3 "$M/db.sqlite" 'SELECT count(*) FROM t;')" = 900 ]
unmount_smux "$M"
stop_net_servers
