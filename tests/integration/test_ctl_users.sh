#!/usr/bin/env bash
# test_ctl_users.sh - who may write .smux/ctl (issue 11 item 1: root and
# the mounting user; EACCES for anyone else, also under allow_other), with
# unprivileged users other than nobody (uids with no passwd entry): root
# mounts with allow_other and no_default_permissions (so the kernel checks
# nothing and the daemon's own check is what refuses): uids U1 and U2 can
# read .smux/stats, their writes of .smux/ctl fail with EACCES and change
# nothing, and root's works. (A mount by an unprivileged user cannot be
# tested here: /dev/fuse is root's only, 0600, on this machine.)
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (setpriv to other uids)"
U1=$((40000 + RANDOM % 10000))
U2=$((U1 + 1))
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
chmod 755 "$T"
M=$T/mnt
status_of() { jq -r ".backends[] | select(.name == \"$1\") | .status" "$M/.smux/stats"; }

log "--- root's allow_other mount: uids $U1 and $U2 are refused by the daemon"
new_config "$T/r.conf" m allow_other=true default_permissions=false
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
mount_smux "$T/r.conf" "$M"
for u in "$U1" "$U2"; do
	as "$u" cat "$M/.smux/stats" >/dev/null || fail "uid $u cannot read .smux/stats under allow_other"
	out=$(as "$u" sh -c "echo 'drain a' > '$M/.smux/ctl'" 2>&1) && fail "uid $u could write .smux/ctl"
	case $out in *"Permission denied"*) ;; *) fail "uid $u's write: $out (want EACCES)" ;; esac
	out=$(as "$u" "$(dirname "$SMUXFS")/smuxctl" -m "$M" drain b 2>&1) && fail "uid $u's smuxctl drain b worked"
done
[ "$(jq -c '[.backends[].status]' "$M/.smux/stats")" = '["up","up"]' ] ||
	fail "a refused write changed the tree: $(jq -c '[.backends[].status]' "$M/.smux/stats")"
echo "drain a" >"$M/.smux/ctl" || fail "root's drain a refused"
[ "$(status_of a)" = draining ] || fail "root's drain a did nothing"
unmount_smux "$M"

log "ok"
