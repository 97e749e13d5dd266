#!/usr/bin/env bash
# test_drain_nameless.sh - a file held open for writing whose name goes
# while a mirror replica is drained (s42-t2, both 100% before the fix):
#   - renamed over: f open for writing, r1 drained, g written, closed and
#     renamed over f, r1 undrained, the old descriptor writes on and is
#     closed. ext4: f holds g's bytes (the old descriptor writes its own
#     nameless file). Before: the writer's write intent was reconciled,
#     and its bytes under r1's f (r1 had missed the rename) were the
#     "newest copy": copied over g on every replica - an acknowledged
#     file lost.
#   - unlinked: B/a/f open for writing, r1 drained, f unlinked, B/a
#     removed, r1 undrained, the writer writes on and is closed. ext4: B
#     is empty. Before: B/a came back (r1's copy, reconciled as newest).
#   - a file with a second name (h) renamed over while r1 is drained
#     (s42-t3): h, on every replica, holds every write of the writer.
# After a repair every replica holds what the mount shows, no hint left.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "r0 r1 r2"
for r in r0 r1 r2; do cfg_file "$r" "$T/$r"; done
M=$T/mnt
mount_smux "$T/c.conf" "$M"

timeout 60 python3 - "$M" <<'PY' || fail "the writer's steps failed"
import os, sys
M = sys.argv[1]
def ctl(s):
    with open(M + '/.smux/ctl', 'w') as f:
        f.write(s + '\n')
fd = os.open(M + '/f', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'a' * 100)
ctl('drain r1')
with open(M + '/g', 'w') as g:
    g.write('x' * 10)
os.rename(M + '/g', M + '/f')
ctl('undrain r1')
os.write(fd, b'c' * 100)
os.close(fd)
os.makedirs(M + '/B/a')
fd = os.open(M + '/B/a/f', os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b'z' * 10)
ctl('drain r1')
os.unlink(M + '/B/a/f')
os.rmdir(M + '/B/a')
ctl('undrain r1')
os.write(fd, b'q' * 10)
os.close(fd)
# a writer of a file with another name (h), renamed over: the file keeps
# the name h, and h on r1 (which missed the rename) gets every write too
fd = os.open(M + '/k', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.link(M + '/k', M + '/h')
os.write(fd, b'H1')
ctl('drain r1')
with open(M + '/g2', 'w') as g:
    g.write('new')
os.rename(M + '/g2', M + '/k')
os.write(fd, b'H2')
ctl('undrain r1')
os.write(fd, b'H3')
os.close(fd)
PY
echo repair >"$M/.smux/ctl"
repair_settled "$M" 30
[ "$(cat "$M/f")" = xxxxxxxxxx ] || fail "f through the mount holds $(wc -c <"$M/f") bytes, not g's 10"
[ -z "$(ls -A "$M/B")" ] || fail "B through the mount holds: $(ls -A "$M/B")"
[ "$(cat "$M/k")" = new ] || fail "k through the mount: $(cat "$M/k")"
[ "$(cat "$M/h")" = H1H2H3 ] || fail "h through the mount: $(cat "$M/h")"
for r in r0 r1 r2; do
	[ "$(cat "$T/$r/k")" = new ] || fail "$r's k: $(cat "$T/$r/k")"
	[ "$(cat "$T/$r/h")" = H1H2H3 ] || fail "$r's h: $(cat "$T/$r/h")"
	[ "$(cat "$T/$r/f")" = xxxxxxxxxx ] || fail "$r's f holds $(wc -c <"$T/$r/f") bytes, not g's 10"
	[ -z "$(ls -A "$T/$r/B")" ] || fail "$r's B holds: $(ls -A "$T/$r/B")"
done
log "a writer whose name was renamed over or unlinked while r1 was drained: f holds g's bytes, B is empty, h every write, on every replica"
unmount_smux "$M"
