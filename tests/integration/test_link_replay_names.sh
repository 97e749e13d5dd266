#!/usr/bin/env bash
# test_link_replay_names.sh - a mirror of two file backends [a, b]: a
# name of a file of several names that b missed is replayed as a link of
# another name of that file on b, also when the daemon does not remember
# the link (found by an outside tester, s43-t3):
#   - f, g, h one file; chmod 600 h while b was drained, then right
#     after the undrain an append through f and mv h h2: b got h2 as a
#     copy (the rename skipped b, which had a hint for h), its f and g
#     stayed a file of two names, and a later append through f never
#     reached h2 there;
#   - ln k l; echo w >> l while b was drained, then a remount: the
#     daemon's memo of the link was gone and b got l as a copy, k
#     without w.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

# same_file R N1 N2...: the names are one file of that many names on R
same_file() {
	local r=$1 n
	shift
	n=$(cd "$T/$r" && stat -c '%i %h' "$@" | sort -u)
	[ "$(echo "$n" | wc -l)" = 1 ] && [ "${n#* }" = $# ] ||
		fail "$* on $r: $(cd "$T/$r" && stat -c '%n %i %h' "$@" | tr '\n' ' ')"
}

mkdir "$M/d"
printf old. >"$M/d/f"
ln "$M/d/f" "$M/d/g"
ln "$M/d/f" "$M/d/h"
echo old >"$M/k"
timeout 30 python3 - "$M" <<'PY' || fail "chmod, undrain, append, mv"
import os, sys
m = sys.argv[1]
def ctl(s):
    with open(m + "/.smux/ctl", "w") as c:
        c.write(s + "\n")
ctl("drain b")
os.chmod(m + "/d/h", 0o600)
ctl("undrain b")
with open(m + "/d/f", "a") as f:
    f.write("NEW!")
os.rename(m + "/d/h", m + "/d/h2")
PY
repair_settled "$M" 30
same_file b d/f d/g d/h2
[ "$(stat -c %a "$T/b/d/h2")" = 600 ] || fail "h2 on b: mode $(stat -c %a "$T/b/d/h2")"
printf ZZ >>"$M/d/f"
[ "$(cat "$T/b/d/h2")" = old.NEW!ZZ ] || fail "h2 on b: $(cat "$T/b/d/h2")"
log "f, g, h2 one file on b"

timeout 20 sh -c "echo 'drain b' >'$CTL'" || fail "drain b"
ln "$M/k" "$M/l"
echo w >>"$M/l"
unmount_smux "$M"
mount_smux "$T/c.conf" "$M"
repair_settled "$M" 30
same_file b k l
[ "$(cat "$T/b/k")" = "$(printf 'old\nw')" ] || fail "k on b: $(cat "$T/b/k")"
log "k, l one file on b after the remount"
unmount_smux "$M"
