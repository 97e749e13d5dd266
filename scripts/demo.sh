#!/usr/bin/env bash
# scripts/demo.sh - `make demo`: mounts config/demo.conf (a mirror over two
# local directories under build/demo/) at build/demo/mnt, writes a few files
# through the mount, shows that both replicas hold them and prints
# .smux/stats. The mount stays up; `make demo-stop` ends it. Builds nothing
# (make does); SMUXFS selects the daemon (default build/smuxfs).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
smuxfs=${SMUXFS:-$repo/build/smuxfs}
demo=$repo/build/demo
mnt=$demo/mnt

if [ ! -x "$smuxfs" ]; then
	echo "demo: no daemon at $smuxfs; run 'make' first" >&2
	exit 1
fi
if mountpoint -q "$mnt"; then
	echo "demo: already mounted at $mnt (stop it with: make demo-stop)"
	exit 0
fi

mkdir -p "$demo/replica-a" "$demo/replica-b" "$demo/cache" "$demo/state" "$mnt"
sed "s|@DEMO_DIR@|$demo|g" config/demo.conf >"$demo/demo.conf"

echo "== mounting $demo/demo.conf at $mnt"
# The daemon backgrounds itself once the mount is ready.
"$smuxfs" "$demo/demo.conf" "$mnt"
echo "mounted at: $mnt"

echo "== writing through the mount"
echo "hello from smuxfs ($(date -u +%FT%TZ))" >"$mnt/hello.txt"
mkdir -p "$mnt/notes"
printf 'A mirror writes every file to both replicas.\n' >"$mnt/notes/readme.md"
head -c 1048576 /dev/urandom >"$mnt/random-1MiB.bin"
ls -l "$mnt"

for r in replica-a replica-b; do
	echo "== $demo/$r"
	ls -lR "$demo/$r"
done
if cmp -s "$mnt/random-1MiB.bin" "$demo/replica-a/random-1MiB.bin" &&
	cmp -s "$mnt/random-1MiB.bin" "$demo/replica-b/random-1MiB.bin"; then
	echo "both replicas hold identical copies"
else
	echo "demo: the replicas differ from the mount" >&2
fi

echo "== $mnt/.smux/stats"
if command -v jq >/dev/null; then
	jq . "$mnt/.smux/stats"
else
	cat "$mnt/.smux/stats"
	echo
fi

echo
echo "The mount stays up at $mnt; try: ls $mnt, cat $mnt/.smux/config"
echo "Stop it with: make demo-stop"
