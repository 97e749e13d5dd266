#!/usr/bin/env bash
# test_s3_dots.sh - a bucket another client filled with keys of "." and
# ".." segments (../evil, d/./x, d/../y: the scripted server of
# tests/servers/s3_hostile.py, bucket "dots", lists them as stored): every
# directory lists one "." and one ".." (readdir gave the root ". .. .."
# and d/ ". . .. .."), and the mount reaches nothing outside it.
. "$(dirname "$0")/lib.sh"

start_script_server s3_hostile.py
new_config "$T/c.conf" s
cfg_raw "[backend s]
type = s3
endpoint = http://127.0.0.1:$SCRIPT_PORT
bucket = dots
path_style = true
credentials_env = DOTS
"
export DOTS_ACCESS_KEY_ID=k DOTS_SECRET_ACCESS_KEY=s
M=$T/mnt
mount_smux "$T/c.conf" "$M"
# readdir as ls -a shows it: its own "." and ".." once, nothing else
[ "$(ls -a "$M" | tr '\n' ' ')" = ". .. .smux d " ] ||
	fail "the root lists $(ls -a "$M" | tr '\n' ' ')"
[ "$(ls -a "$M/d" | tr '\n' ' ')" = ". .. ok " ] ||
	fail "d/ lists $(ls -a "$M/d" | tr '\n' ' ')"
[ "$(ls -A "$M/d")" = ok ] || fail "d/ lists $(ls -A "$M/d" | tr '\n' ' ')"
[ "$(cat "$M/d/ok")" = dots ] || fail "d/ok does not read"
unmount_smux "$M"
kill "$SCRIPT_PID"
log "keys with . and .. segments list no entries of their own"
