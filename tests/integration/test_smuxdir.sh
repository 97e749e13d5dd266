#!/usr/bin/env bash
# test_smuxdir.sh - the .smux/ virtual directory at the mount root:
# .smux/stats is valid JSON with the seed's field names and counts calls,
# .smux/config is valid JSON describing the tree without secrets,
# .smux/metrics is what stats says in the Prometheus text format (promtool
# check metrics accepts it), nothing
# can be created, written, renamed or removed under .smux, and .smux never
# reaches a backing directory (even when a backend has its own .smux).
. "$(dirname "$0")/lib.sh"

M=$T/mnt
SECRET=smux-it-secret-$RANDOM$RANDOM$RANDOM
printf '%s\n' "$SECRET" >"$T/secret.key"
export SMUX_IT_SECRET_ENV=$SECRET

new_config "$T/m.conf" m
cfg_mux m mirror "a f" backend_timeout=3s cooldown=250ms
cfg_file a "$T/a"
cfg_faulty f f_in error_rate=0 latency=0 seed=3
cfg_file f_in "$T/b"
# a backend of a kind that carries credentials, outside the mounted tree;
# used only if this daemon already knows such a kind
cp "$T/m.conf" "$T/plain.conf"
cfg_raw "[backend vault]"
cfg_raw "type = s3"
cfg_raw "endpoint = http://127.0.0.1:9"
cfg_raw "bucket = b"
cfg_raw "credentials_file = $T/secret.key"
cfg_raw ""
cfg_raw "[backend vault2]"
cfg_raw "type = s3"
cfg_raw "endpoint = http://127.0.0.1:9"
cfg_raw "bucket = b"
cfg_raw "credentials_env = SMUX_IT_SECRET_ENV"
if "$SMUXFS" --check-config "$T/m.conf" >"$T/check.out" 2>&1; then
	with_secret=1
	grep -qF "$SECRET" "$T/check.out" && fail "--check-config prints the secret"
else
	log "this daemon rejects the s3 sections ($(head -c 200 "$T/check.out")); testing without a credentialed backend"
	with_secret=0
	cp "$T/plain.conf" "$T/m.conf"
fi
# a backend that already holds a .smux of its own must not leak it
mkdir -p "$T/a/.smux"
echo "backend junk" >"$T/a/.smux/stats"

mount_smux "$T/m.conf" "$M"

# --- stats ------------------------------------------------------------------------
log ".smux/stats"
[ -d "$M/.smux" ] || fail ".smux is not a directory"
jq -e . "$M/.smux/stats" >/dev/null || fail ".smux/stats is not JSON: $(head -c 300 "$M/.smux/stats")"
grep -q "backend junk" "$M/.smux/stats" && fail ".smux/stats shows the backend's own .smux"
jq -e '
	(.name == "m") and (.mode == "mirror") and
	([.totalCalls, .totalFailovers, .totalFanoutPartials, .pendingHints]
		| all(type == "number")) and
	(.backends | type == "array" and length == 2) and
	([.backends[].name] == ["a", "f"]) and
	(.backends | all(
		(.status | IN("up", "down", "draining")) and
		([.hits, .misses, .errors, .timeouts, .lastLatencyMs,
		  .p50LatencyMs, .p99LatencyMs, .consecutiveFailures,
		  .inFlightCount] | all(type == "number")) and
		has("lastTransitionAt")))' "$M/.smux/stats" >/dev/null ||
	{ jq . "$M/.smux/stats" >&2; fail ".smux/stats lacks seed fields (above)"; }
calls0=$(stats "$M" .totalCalls)
hits0=$(backend_stat "$M" a hits)
for i in 1 2 3 4 5; do echo "$i" >"$M/file$i"; done
cat "$M"/file* >/dev/null
calls1=$(stats "$M" .totalCalls)
hits1=$(backend_stat "$M" a hits)
log "totalCalls $calls0 -> $calls1, a.hits $hits0 -> $hits1"
[ "$calls1" -gt "$calls0" ] || fail "totalCalls did not grow with I/O"
[ "$hits1" -gt "$hits0" ] || fail "a.hits did not grow with I/O"
[ "$(stat -c %s "$M/.smux/stats")" -ge 0 ]
# the reported size must not cut the JSON short (cat reads to EOF; a
# program that trusts st_size must get it all too)
size=$(stat -c %s "$M/.smux/stats")
if [ "$size" -gt 0 ]; then
	head -c "$size" "$M/.smux/stats" | jq -e . >/dev/null ||
		fail ".smux/stats st_size ($size) cuts the JSON"
fi

# --- config -----------------------------------------------------------------------
log ".smux/config"
jq -e . "$M/.smux/config" >/dev/null || fail ".smux/config is not JSON"
for w in mirror "$T/a" f_in faulty; do
	grep -qF "$w" "$M/.smux/config" || fail ".smux/config does not mention $w"
done
if grep -rqF "$SECRET" "$M/.smux/" 2>/dev/null; then
	fail "a secret appears under .smux"
fi
if [ "$with_secret" = 1 ]; then
	grep -qF vault "$M/.smux/config" || log "note: .smux/config omits sections outside the tree"
fi
for f in "$T"/smuxfs.*.log; do
	! grep -qF "$SECRET" "$f" || fail "the daemon log shows the secret"
done
ps -eo args | grep -F "$M" | grep -qF "$SECRET" && fail "the secret is in ps"

# --- metrics ----------------------------------------------------------------------
log ".smux/metrics"
cp "$M/.smux/metrics" "$T/metrics.txt"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
	{ cat "$T/promtool.out" >&2; fail "promtool check metrics rejects .smux/metrics (above)"; }
# the same numbers as stats, labelled by mux, path and backend
hits=$(backend_stat "$M" a hits)
mhits=$(sed -n 's/^smux_backend_hits_total{mux="m",path="m",backend="a"} //p' "$T/metrics.txt")
[ -n "$mhits" ] || fail "no smux_backend_hits_total for a: $(grep hits "$T/metrics.txt")"
[ "$mhits" -le "$hits" ] && [ "$mhits" -ge "$hits0" ] ||
	fail "metrics hits $mhits for a, stats says $hits"
grep -qx 'smux_backend_state{mux="m",path="m",backend="f",state="up"} 1' "$T/metrics.txt" ||
	fail "no up state for f: $(grep smux_backend_state "$T/metrics.txt")"
grep -qx 'smux_backend_up{mux="m",path="m",backend="a"} 1' "$T/metrics.txt" ||
	fail "smux_backend_up for a"
grep -q '^smux_mux_pending_hints{mux="m",path="m"} 0$' "$T/metrics.txt" ||
	fail "smux_mux_pending_hints"
grep -q '^smux_read_cache_hits_total ' "$T/metrics.txt" || fail "no read cache series"

# --- nothing can be changed under .smux ---------------------------------------------
log ".smux is read-only"
ls -a "$M" >"$T/root.ls"
[ "$(grep -cx .smux "$T/root.ls")" -le 1 ] || fail ".smux listed twice at the root"
expect_fail "" touch "$M/.smux/new"
expect_fail "" mkdir "$M/.smux/dir"
expect_fail "" sh -c "echo x > '$M/.smux/stats'"
expect_fail "" sh -c "echo x >> '$M/.smux/config'"
expect_fail "" truncate -s 0 "$M/.smux/stats"
expect_fail "" rm -f "$M/.smux/stats"
expect_fail "" rm -f "$M/.smux/config"
expect_fail "" sh -c "echo x > '$M/.smux/metrics'"
expect_fail "" mv "$M/.smux/stats" "$M/.smux/stats2"
expect_fail "" mv "$M/.smux/stats" "$M/stolen"
expect_fail "" cp "$M/file1" "$M/.smux/file1"
expect_fail "" ln -s x "$M/.smux/link"
expect_fail "" rmdir "$M/.smux"
expect_fail "" rm -rf "$M/.smux"
expect_fail "" mv "$M/.smux" "$M/smux2"
expect_fail "" mv "$M/file1" "$M/.smux"
expect_fail "" mkdir "$M/.smux"
expect_fail "" chmod 777 "$M/.smux/stats"
[ -f "$M/.smux/stats" ] && [ -f "$M/.smux/config" ] || fail ".smux files gone"
[ -f "$M/file1" ] || fail "file1 gone after a refused mv onto .smux"
jq -e . "$M/.smux/stats" >/dev/null
[ ! -e "$M/stolen" ] && [ ! -e "$M/smux2" ] || fail "a rename out of .smux half-happened"

unmount_smux "$M"

# --- never in the backends ------------------------------------------------------------
log ".smux never reaches a backend"
[ "$(cat "$T/a/.smux/stats")" = "backend junk" ] || fail "the backend's own .smux was changed"
[ ! -e "$T/b/.smux" ] || fail "$T/b/.smux exists"
for d in "$T/a" "$T/b"; do
	# the file backend's work folder (.smuxfs-tmp) is its own, and empty
	n=$(find "$d" \( -path "$d/.smux" -o -path "$d/.smuxfs-tmp" \) -prune \
		-o -name '*smux*' -print | wc -l)
	[ "$n" -eq 0 ] || fail "$d has smux-named entries: $(find "$d" -name '*smux*')"
	[ -z "$(ls -A "$d/.smuxfs-tmp")" ] || fail "$d/.smuxfs-tmp is not empty"
	[ -f "$d/file1" ] || fail "$d lacks file1"
done
