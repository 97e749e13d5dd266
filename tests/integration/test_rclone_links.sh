#!/usr/bin/env bash
# test_rclone_links.sh KIND - symlinks on a backend that stores only
# regular files, with `rclone_links = true` (rclone's --links convention:
# the link "a" is the object "a.rclonelink" holding the target), on one
# WebDAV backend (KIND http, nginx) or one Bunny backend (KIND bunny, the
# emulator):
#   - ln -s (relative, absolute, dangling), readlink, ls -l, find -type l,
#     stat -c %F show links as on a local disk, and the server holds
#     NAME.rclonelink objects whose content is the target;
#   - cp -a, tar -x and rsync -a (twice, a link's target changed) of a
#     tree with links give the same tree (diff -r --no-dereference), also
#     after a remount;
#   - mv of a link (to another directory), ln -sf over a link and over a
#     file, a file moved over a link, rm of a link: the server then holds
#     exactly what the mount shows;
#   - an object NAME.rclonelink put on the server by another client shows
#     as the link NAME, and a name ending in .rclonelink cannot be created
#     through the mount (EINVAL), so no file is ever taken for a link;
#   - without the key, ln -s is refused (EPERM, as a filesystem without symlinks);
#   - on a mirror of a local directory and such a backend, links land on
#     both, and a name ending in .rclonelink (create, rename onto it) is
#     refused before the local replica stores it: no replica holds what
#     the other cannot, no hint is left that could never replay.
. "$(dirname "$0")/lib.sh"

KIND=${1:-http}
M=$T/mnt
case $KIND in
http)
	start_nginx_dav "$T/ng"
	BACKEND="type = http
url = $DAV_URL/"
	STORE=$T/ng/root
	;;
bunny)
	start_bunny_emu "$T/bn" edge emu-secret
	BACKEND="type = bunny
zone = edge
region = uk
endpoint = $BUNNY_URL
credentials_file = $T/bn/key"
	STORE=$T/bn/store/edge
	;;
*) fail "unknown kind $KIND" ;;
esac

# put_behind NAME CONTENT: an object written by another client
put_behind() {
	case $KIND in
	http) curl -sf -T - "$DAV_URL/$1" <<<"$2" >/dev/null ;;
	bunny) curl -sf -X PUT -H "AccessKey: emu-secret" --data-binary "$2" \
		"$BUNNY_URL/edge/$1" >/dev/null ;;
	esac || fail "cannot put $1 behind the mount"
}

log "--- without rclone_links: ln -s is refused (EPERM, as a filesystem without symlinks)"
new_config "$T/plain.conf" d
cfg_raw "[backend d]
$BACKEND
"
mount_smux "$T/plain.conf" "$M"
if err=$(ln -s target "$M/l0" 2>&1); then
	fail "ln -s succeeded without rclone_links"
fi
case $err in *"not permitted"*) ;; *) fail "ln -s without rclone_links: $err" ;; esac
unmount_smux "$M"

log "--- rclone_links = true: links as on a local disk"
new_config "$T/links.conf" d dir_cache_timeout=0
cfg_raw "[backend d]
$BACKEND
rclone_links = true
"
mount_smux "$T/links.conf" "$M"
mkdir -p "$M/d/sub"
echo data >"$M/d/file"
ln -s file "$M/d/rel"
ln -s /etc/hostname "$M/d/abs"
ln -s ../nowhere "$M/d/dangling"
ln -s ../file "$M/d/sub/up"
[ "$(readlink "$M/d/rel")" = file ] || fail "readlink rel: $(readlink "$M/d/rel")"
[ "$(readlink "$M/d/abs")" = /etc/hostname ] || fail "readlink abs"
[ "$(cat "$M/d/rel")" = data ] || fail "cat through the link"
[ "$(cat "$M/d/sub/up")" = data ] || fail "cat through ../file"
[ "$(stat -c %F "$M/d/rel")" = "symbolic link" ] || fail "stat %F of rel: $(stat -c %F "$M/d/rel")"
[ "$(stat -c %s "$M/d/abs")" = 13 ] || fail "size of abs: $(stat -c %s "$M/d/abs")"
[ "$(find "$M/d" -type l | sort | tr '\n' ' ')" = "$M/d/abs $M/d/dangling $M/d/rel $M/d/sub/up " ] ||
	fail "find -type l: $(find "$M/d" -type l | sort | tr '\n' ' ')"
ls -l "$M/d" | grep -q -- "rel -> file" || fail "ls -l: $(ls -l "$M/d")"
[ "$(cat "$STORE/d/rel.rclonelink")" = file ] || fail "the server holds no d/rel.rclonelink: $(ls -A "$STORE/d")"
[ ! -e "$STORE/d/rel" ] || fail "the server holds d/rel beside its link object"

log "--- cp -a and tar -x of a tree with links"
S=$T/src
mkdir -p "$S/a/b"
echo one >"$S/a/one"
ln -s one "$S/a/l1"
ln -s ../a/one "$S/a/b/l2"
ln -s b "$S/a/lb"
ln -s "/no/such dir/x" "$S/a/b/odd"
cp -a "$S" "$M/copy"
(cd "$S" && tar cf "$T/t.tar" .)
mkdir "$M/untar"
tar xf "$T/t.tar" -C "$M/untar" || fail "tar x of links"
diff -r --no-dereference "$S" "$M/copy" || fail "cp -a of links differs"
diff -r --no-dereference "$S" "$M/untar" || fail "tar x of links differs"
unmount_smux "$M"
mount_smux "$T/links.conf" "$M"
diff -r --no-dereference "$S" "$M/copy" || fail "the links after a remount differ"
[ "$(readlink "$M/d/dangling")" = ../nowhere ] || fail "dangling after a remount"
rsync -a "$S/" "$M/rs/" || fail "rsync -a of links"
ln -sfn one-changed "$S/a/l1" # rsync replaces it by a temp name and a rename
rsync -a "$S/" "$M/rs/" || fail "rsync -a of a changed link"
diff -r --no-dereference "$S" "$M/rs" || fail "rsync -a of links differs"

log "--- mv, ln -sf, a file over a link, rm"
mv "$M/d/rel" "$M/d/sub/rel2"
[ "$(readlink "$M/d/sub/rel2")" = file ] || fail "mv of a link"
[ ! -e "$STORE/d/rel.rclonelink" ] || fail "the moved link's object stayed"
ln -sf other "$M/d/abs"
[ "$(readlink "$M/d/abs")" = other ] || fail "ln -sf over a link"
echo plain >"$M/d/was-file"
ln -sf file "$M/d/was-file"
[ "$(readlink "$M/d/was-file")" = file ] || fail "ln -sf over a file: $(stat -c %F "$M/d/was-file")"
[ ! -e "$STORE/d/was-file" ] || fail "the replaced file stayed on the server"
echo moved >"$M/d/mover"
mv -f "$M/d/mover" "$M/d/abs"
[ "$(stat -c %F "$M/d/abs")" = "regular file" ] || fail "a file moved over a link: $(stat -c %F "$M/d/abs")"
[ "$(cat "$M/d/abs")" = moved ] || fail "a file moved over a link reads $(cat "$M/d/abs")"
[ ! -e "$STORE/d/abs.rclonelink" ] || fail "the replaced link's object stayed"
rm "$M/d/dangling"
[ ! -e "$M/d/dangling" ] && [ ! -L "$M/d/dangling" ] || fail "rm of a link"
[ ! -e "$STORE/d/dangling.rclonelink" ] || fail "the removed link's object stayed"

log "--- objects of another client, and reserved names"
put_behind "d/theirs.rclonelink" "file"
sleep 1.5 # past the attribute and directory caches of the first listing
[ "$(readlink "$M/d/theirs")" = file ] || fail "another client's link object: $(ls -la "$M/d")"
if err=$(echo x 2>&1 >"$M/d/mine.rclonelink"); then
	fail "a file named mine.rclonelink was created"
fi
case $err in *"Invalid argument"*) ;; *) fail "creating mine.rclonelink: $err (want EINVAL)" ;; esac
[ ! -e "$STORE/d/mine.rclonelink" ] || fail "the server holds mine.rclonelink"
! ls -A "$M/d" | grep -q rclonelink || fail "a link object is listed by its own name: $(ls -A "$M/d")"
rm -r "$M/copy" "$M/untar" "$M/rs"
[ -z "$(find "$STORE/copy" "$STORE/untar" "$STORE/rs" 2>/dev/null)" ] ||
	fail "rm -r left $(find "$STORE/copy" "$STORE/untar" "$STORE/rs")"
unmount_smux "$M"

log "--- a mirror with a local directory: links on both, reserved names on neither"
new_config "$T/mirror.conf" m
cfg_mux m mirror "f d"
cfg_file f "$T/f"
cfg_raw "[backend d]
$BACKEND
rclone_links = true
"
mount_smux "$T/mirror.conf" "$M"
ln -s target "$M/both"
[ "$(readlink "$T/f/both")" = target ] || fail "the local replica has no link both"
[ "$(cat "$STORE/both.rclonelink")" = target ] || fail "the server has no both.rclonelink"
if echo x 2>/dev/null >"$M/y.rclonelink"; then
	fail "the mirror took a name its WebDAV/Bunny member cannot hold"
fi
[ ! -e "$T/f/y.rclonelink" ] || fail "the local replica holds y.rclonelink, the other cannot"
echo ok >"$M/ok"
if mv "$M/ok" "$M/z.rclonelink" 2>/dev/null; then
	fail "the mirror renamed onto a name its WebDAV/Bunny member cannot hold"
fi
[ "$(cat "$T/f/ok")" = ok ] && [ ! -e "$T/f/z.rclonelink" ] || fail "a refused rename moved ok"
smuxctl_status=$("$(dirname "$SMUXFS")/smuxctl" -m "$M" status 2>&1 || true)
grep -q "pending hints 0" <<<"$smuxctl_status" || fail "hints left by refused names: $smuxctl_status"
unmount_smux "$M"
log "ok"
