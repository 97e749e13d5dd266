#!/usr/bin/env bash
# test_odd_names.sh KIND - names with characters URLs, XML and JSON treat
# specially (space, + % # ? & ; = : @ [ ] * ' \ < >, UTF-8) through a
# network backend's listing: made through the mount, then listed and read
# by a fresh daemon. A listing's names are also the directory's known
# names (dirnames.c): a name decoded differently from the one a lookup
# asks for would make an existing file "no such file".
#
# KIND: a net_config mode of one backend (s3, http, bunny, swift).
. "$(dirname "$0")/lib.sh"

KIND=${1:?usage: test_odd_names.sh KIND}
CONF=$T/$KIND.conf
net_config "$KIND" "$CONF"
M=$T/mnt
names=('a b' 'p+q' 'pct%41x' 'h#i' 'q?r' "caf$(printf '\xc3\xa9')" "sq'x"
	'amp&x' 'semi;x' 'lt<gt>' 'tilde~x' 'star*x' 'eq=x' 'col:x' 'at@x'
	'br[x]' 'bs\x' '-dash')
mount_smux "$CONF" "$M"
mkdir "$M/e"
for n in "${names[@]}"; do printf '%s\n' "$n" >"$M/e/$n" || fail "create '$n'"; done
unmount_smux "$M"

mount_smux "$CONF" "$M"
ls -A "$M/e" >"$T/ls"
n1=$(wc -l <"$T/ls")
[ "$n1" = "${#names[@]}" ] || { cat "$T/ls" >&2; fail "listed $n1 of ${#names[@]}"; }
for n in "${names[@]}"; do
	grep -qxF -- "$n" "$T/ls" || fail "'$n' not listed"
	[ "$(cat -- "$M/e/$n" 2>&1)" = "$n" ] ||
		fail "'$n' not readable after the listing: $(cat -- "$M/e/$n" 2>&1)"
done
log "$KIND: ${#names[@]} odd names listed and read by a fresh daemon"
unmount_smux "$M"
stop_net_servers
