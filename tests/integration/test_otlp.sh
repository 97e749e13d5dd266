#!/usr/bin/env bash
# test_otlp.sh - spans exported as OTLP/HTTP JSON (issue 11 item 4) to a
# receiver this test runs (tests/tools/otlp_receiver.py), on a failover
# mount whose primary fails every call: a read fails over, and the
# receiver gets, in one trace, the operation span (storage-mux.<op>, with
# mux.mode failover) and its attempt spans as children - one on the primary
# with mux.outcome transient, one on the standby with mux.outcome ok, each
# with mux.backend.name, mux.attempt.index and mux.latency.ms. A collector
# that is down costs the mount nothing (writes still succeed).
. "$(dirname "$0")/lib.sh"

M=$T/mnt
port=$(start_receiver "$T/rx")

new_config "$T/o.conf" m "otlp_endpoint=http://127.0.0.1:$port"
cfg_mux m failover "p s" backend_timeout=5s cooldown=10s
cfg_faulty p pin error_rate=1.0
cfg_file pin "$T/p"
cfg_file s "$T/s"
echo before >"$T/s/pre" # on the standby only, as after an earlier failover
mount_smux "$T/o.conf" "$M"
# the first call of the mount: p fails (transient), s answers
[ "$(cat "$M/pre")" = before ] || fail "the read did not fail over"
echo traced >"$M/traced"
[ "$(cat "$T/s/traced")" = traced ] || fail "the write did not go to the standby"
# the exporter sends at least once a second
for ((i = 0; i < 100; i++)); do
	grep -q '"p"' "$T/rx/traces.jsonl" 2>/dev/null && break
	sleep 0.1
done
unmount_smux "$M" # sends what is queued
[ ! -e "$T/rx/bad" ] || fail "the receiver got a body that is not JSON"
python3 - "$T/rx/traces.jsonl" <<'PY' || fail "spans (above)"
import json, sys
spans = []
for line in open(sys.argv[1]):
    req = json.loads(line)
    for rs in req["resourceSpans"]:
        attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        assert attrs["service.name"]["stringValue"] == "smuxfs", attrs
        for ss in rs["scopeSpans"]:
            spans += ss["spans"]
def attrs(s):
    out = {}
    for a in s.get("attributes", []):
        v = a["value"]
        out[a["key"]] = v.get("stringValue", v.get("intValue"))
    return out
by_id = {s["spanId"]: s for s in spans}
for s in spans:
    assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16, s
    assert int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]), s
failed = [s for s in spans if s["name"] == "storage-mux.attempt"
          and attrs(s).get("mux.backend.name") == "p"
          and attrs(s).get("mux.outcome") == "transient"]
if not failed:
    sys.exit("no transient attempt on p among %d spans" % len(spans))
ok = 0
for f in failed:
    parent = by_id.get(f.get("parentSpanId"))
    if not parent or not parent["name"].startswith("storage-mux."):
        continue
    pa = attrs(parent)
    if pa.get("mux.mode") != "failover" or parent["traceId"] != f["traceId"]:
        continue
    sibs = [s for s in spans if s.get("parentSpanId") == parent["spanId"]
            and attrs(s).get("mux.backend.name") == "s"
            and attrs(s).get("mux.outcome") == "ok"]
    for s in sibs + [f]:
        a = attrs(s)
        for k in ("mux.attempt.index", "mux.latency.ms", "mux.mode"):
            if k not in a:
                sys.exit("attempt span lacks %s: %r" % (k, s))
    if sibs:
        ok += 1
if not ok:
    sys.exit("no operation span with a transient attempt on p and an ok one on s")
print("spans: %d, failovers traced: %d" % (len(spans), ok))
PY

log "--- a collector that is down costs nothing"
pkill -f "otlp_receiver.py $T/rx" || true
for ((i = 0; i < 100; i++)); do
	pgrep -f "otlp_receiver.py $T/rx" >/dev/null || break
	sleep 0.05
done
mount_smux "$T/o.conf" "$M"
for i in 1 2 3 4 5; do echo "$i" >"$M/down$i" || fail "a write failed with the collector down"; done
[ "$(cat "$T/s/down5")" = 5 ] || fail "down5"
unmount_smux "$M"
log "ok"
