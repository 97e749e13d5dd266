#!/usr/bin/env bash
# test_dirs.sh - directory listings and the mount root, over a file backend
# (real directories), a memory backend (an object store: "dir/" markers and
# implied directories) and a mirror of two file backends:
#   - a directory of 1200 entries with long names lists completely, once
#     each, with the sizes the backend holds (the kernel reads it in many
#     pieces: offsets must carry on where the last piece ended);
#   - telldir/seekdir/rewinddir give back the same entries (perl, which
#     Debian always has);
#   - rm -r of a large tree (unlinking while listing) leaves nothing;
#   - `ls -l` takes attributes from the listing: no LOOKUP per entry is
#     asserted indirectly by comparing `ls -l` to the backend, and by
#     listing a directory whose files vanished from the backend behind the
#     mount's back (a stale listing must not invent content);
#   - file and mirror: a handle open for reading never serves old bytes
#     after a rewrite through the mount was committed (ESTALE), and keeps
#     reading its whole version after a rename;
#   - tar extracting an archive whose first member is "." into the mount
#     root (the root's mtime and mode can be set), as `tar -C /mnt` does;
#   - a directory rename that a name inside cannot take (its new key past
#     the tree's limit) moves all of it or nothing, never half.
. "$(dirname "$0")/lib.sh"

N=${SMUX_IT_DIR_FILES:-1200}
long=$(printf 'n%.0s' $(seq 90))

# names FILE: the names a perl readdir sees, one per line, sorted; fails
# on a duplicate.
perl_list() {
	perl -e '
		opendir(my $d, $ARGV[0]) or die "opendir: $!";
		my %seen; my @all;
		while (defined(my $e = readdir($d))) {
			next if $e eq "." || $e eq "..";
			die "duplicate entry $e\n" if $seen{$e}++;
			push @all, $e;
		}
		print "$_\n" for sort @all;' "$1"
}

# perl_seek DIR: telldir/seekdir/rewinddir agree with a plain read.
perl_seek() {
	perl -e '
		opendir(my $d, $ARGV[0]) or die "opendir: $!";
		my @first; push @first, scalar readdir($d) for 1 .. 700;
		my $pos = telldir($d);
		my @next; push @next, scalar readdir($d) for 1 .. 500;
		seekdir($d, $pos);
		my @again; push @again, scalar readdir($d) for 1 .. 500;
		"@next" eq "@again" or die "seekdir: different entries\n";
		rewinddir($d);
		my @re; push @re, scalar readdir($d) for 1 .. 700;
		"@first" eq "@re" or die "rewinddir: different entries\n";
		my $n = 700; $n++ while defined(scalar readdir($d));
		print "$n\n";' "$1"
}

run_case() {
	local kind=$1 m=$T/mnt-$kind expect n
	new_config "$T/$kind.conf" root
	case $kind in
	file) cfg_file root "$T/$kind-a" ;;
	memory) _cfg_section "backend root" "type=memory" ;;
	mirror)
		cfg_mux root mirror "a b"
		cfg_file a "$T/$kind-a"
		cfg_file b "$T/$kind-b"
		;;
	esac
	mount_smux "$T/$kind.conf" "$m"

	log "$kind: $N files with ${#long}-byte names in one directory"
	mkdir "$m/big"
	for ((i = 0; i < N; i++)); do
		printf '%d' "$i" >"$m/big/$long.$i"
	done
	for ((i = 0; i < N; i++)); do echo "$long.$i"; done | sort >"$T/expect"
	perl_list "$m/big" >"$T/got" || fail "$kind: listing failed"
	cmp -s "$T/expect" "$T/got" ||
		fail "$kind: listing differs: $(diff "$T/expect" "$T/got" | head -5)"
	n=$(perl_seek "$m/big") || fail "$kind: seekdir/rewinddir"
	[ "$n" -eq $((N + 2)) ] || fail "$kind: after rewinddir $n entries, not $((N + 2))"

	# sizes from the listing (ls -l) are the files' sizes
	ls -l "$m/big" | awk 'NR > 1 {print $5, $9}' | sort -k2 >"$T/ls"
	# (file i holds the digits of i; awk, not a subshell per file)
	awk -v long="$long" -v n="$N" \
		'BEGIN { for (i = 0; i < n; i++) print length(i ""), long "." i }' |
		sort -k2 >"$T/ls-expect"
	cmp -s "$T/ls" "$T/ls-expect" || fail "$kind: ls -l sizes differ"

	if [ "$kind" != memory ]; then
		# a file removed behind the mount's back is gone after the
		# attribute timeout, never served from a stale listing
		echo gone >"$m/big/behind"
		sleep 1.2
		rm "$T/$kind-a/big/behind"
		[ "$kind" = mirror ] && rm "$T/$kind-b/big/behind"
		sleep 1.2
		ls "$m/big" | grep -qx behind && fail "$kind: removed file still listed"
		[ -e "$m/big/behind" ] && fail "$kind: removed file still there"
	fi

	if [ "$kind" != memory ]; then
		log "$kind: open read handles across changes through the mount"
		head -c 300000 /dev/urandom >"$T/r-orig"
		head -c 300000 /dev/urandom >"$T/r-new"
		cp "$T/r-orig" "$m/r1"
		cp "$T/r-orig" "$m/r2"
		# (in subshells, so a failure never leaves a descriptor open
		# on the mount)
		# rewritten in place through the mount (cp truncates and
		# writes the same file): a handle opened before reads on, as
		# on a local filesystem - the same bytes a plain directory
		# gives for the same steps
		mkdir -p "$T/plain-$kind"
		cp "$T/r-orig" "$T/plain-$kind/r1"
		rewrite_read() {
			(
				exec 4<"$1/r1"
				head -c 1000 <&4 >/dev/null
				cp "$T/r-new" "$1/r1"
				cat <&4
			)
		}
		rewrite_read "$T/plain-$kind" >"$T/r1-plain" ||
			fail "plain: read across a rewrite"
		rewrite_read "$m" >"$T/r1-got" 2>"$T/r1.err" ||
			fail "$kind: read across a rewrite: $(cat "$T/r1.err")"
		cmp -s "$T/r1-plain" "$T/r1-got" ||
			fail "$kind: read across a rewrite differs from a plain directory's"
		cmp -s "$T/r-new" "$m/r1" || fail "$kind: the rewrite differs"
		# renamed: the open version stays readable, whole
		(
			exec 5<"$m/r2"
			mv "$m/r2" "$m/r2-moved"
			cat <&5
		) >"$T/r2-got" || fail "$kind: read after rename failed"
		cmp -s "$T/r-orig" "$T/r2-got" || fail "$kind: read after rename differs"
		rm "$m/r1" "$m/r2-moved"
	fi

	log "$kind: rm -r while listing"
	rm -r "$m/big"
	[ -e "$m/big" ] && fail "$kind: big still there after rm -r"
	if [ "$kind" != memory ]; then
		[ -z "$(ls -A -I .smuxfs-tmp "$T/$kind-a")" ] ||
			fail "$kind: backing dir not empty"
		[ -z "$(ls -A "$T/$kind-a/.smuxfs-tmp")" ] ||
			fail "$kind: temp files left in the work folder"
	fi

	log "$kind: tar with a \".\" member into the root"
	mkdir -p "$T/src-$kind/sub"
	echo one >"$T/src-$kind/sub/one"
	touch -d '2021-02-03 04:05:06' "$T/src-$kind/sub/one" "$T/src-$kind"
	tar -C "$T/src-$kind" -cf "$T/$kind.tar" .
	tar -C "$m" -xf "$T/$kind.tar" || fail "$kind: tar into the root failed"
	[ "$(cat "$m/sub/one")" = one ] || fail "$kind: extracted content"
	[ "$(stat -c %Y "$m")" = "$(stat -c %Y "$T/src-$kind")" ] ||
		fail "$kind: the root's mtime was not set"
	chmod 0750 "$m"
	[ "$(stat -c %a "$m")" = 750 ] || fail "$kind: chmod of the root"

	log "$kind: a directory rename that a name inside cannot take moves nothing"
	python3 - "$m" <<'PY' || fail "$kind: a refused directory rename (above)"
import errno, os, sys
root = sys.argv[1]
top = os.path.join(root, "top")
os.mkdir(top)
for j in range(5):
    with open(os.path.join(top, "short%d" % j), "w") as f:
        f.write("s%d" % j)
# deep directories, then the longest file name the tree takes there
fd = os.open(top, os.O_RDONLY)
try:
    for i in range(40):
        n = "d" * 250 + "%02d" % i
        os.mkdir(n, dir_fd=fd)
        nfd = os.open(n, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
except OSError as e:
    if e.errno != errno.ENAMETOOLONG:
        raise
lo, hi = 0, 255  # the longest name that fits: its key is the limit
while lo < hi:
    mid = (lo + hi + 1) // 2
    try:
        os.close(os.open("f" * mid, os.O_CREAT | os.O_WRONLY, dir_fd=fd))
        os.unlink("f" * mid, dir_fd=fd)
        lo = mid
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        hi = mid - 1
if lo == 0:
    sys.exit("no room for a file at the depth reached")
os.close(os.open("f" * lo, os.O_CREAT | os.O_WRONLY, dir_fd=fd))
os.close(fd)
try:
    os.rename(top, os.path.join(root, "top-renamed"))
except OSError as e:
    if e.errno != errno.ENAMETOOLONG:
        raise
    # refused: nothing moved, everything still under top/
    # (a listing: the name's lookup before the rename may be cached)
    if "top-renamed" in os.listdir(root):
        sys.exit("a rename that failed left top-renamed/: %s" %
                 sorted(os.listdir(os.path.join(root, "top-renamed"))))
    if sorted(x for x in os.listdir(top) if x.startswith("short")) != \
            ["short%d" % j for j in range(5)]:
        sys.exit("a rename that failed moved some of top/: %s" % os.listdir(top))
else:
    # done (a backend that renames a directory in one call): all of it
    if os.path.exists(top):
        sys.exit("a rename that succeeded left top/")
    top = os.path.join(root, "top-renamed")
for j in range(5):
    with open(os.path.join(top, "short%d" % j)) as f:
        if f.read() != "s%d" % j:
            sys.exit("short%d lost its content" % j)
PY
	# moved whole: its deepest name is past the limit under the new name
	# (a path API: the mount reaches it by its whole key), so back first
	[ -d "$m/top-renamed" ] && mv "$m/top-renamed" "$m/top"
	rm -rf "$m/top"
	unmount_smux "$m"
}

for kind in file memory mirror; do
	run_case "$kind"
done
log "ok"
