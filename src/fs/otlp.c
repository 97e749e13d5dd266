/* SPDX-License-Identifier: MIT */
/*
 * otlp.c - the mux's spans exported as OTLP/HTTP JSON (issue 11 item 4)
 * to `[mount] otlp_endpoint` (e.g. http://127.0.0.1:4318: spans go to
 * ENDPOINT/v1/traces).
 *
 * Owns: a struct smux_tracer the daemon hands every mux (config_build.c);
 * the finished spans' bounded queue and the exporter thread are a sendq
 * (sendq.c). The I/O path
 * only fills a span in memory and, at its end, moves it to the queue under
 * a mutex (never a network call, never a wait: when the queue holds
 * OTLP_QUEUE_MAX spans the new one is dropped and counted). The thread
 * wakes every OTLP_FLUSH_MS (or when OTLP_BATCH spans wait), renders a
 * batch with jansson and POSTs it with libcurl under a short timeout; a
 * batch the collector refuses or cannot take is dropped and counted,
 * never retried into a growing backlog.
 *
 * Spans: the seed's tree - "storage-mux.<operation>" with mux.mode,
 * mux.key, mux.policy, and "storage-mux.attempt" children with
 * mux.backend.name, mux.attempt.index, mux.outcome, mux.latency.ms. A root
 * span gets a new random trace id (getrandom); children take their
 * parent's; every span a random span id.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <time.h>

#include "fs/fs.h"
#include "fs/sendq.h"

#define OTLP_QUEUE_MAX 4096
#define OTLP_BATCH     512
#define OTLP_FLUSH_MS  1000
#define OTLP_TIMEOUT_S 5L
#define OTLP_ATTRS_MAX 8

struct otlp_attr {
	char key[32];
	bool is_int;
	int64_t i;
	char s[128];
};

struct smux_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_id[8];
	bool has_parent;
	char name[64];
	int64_t start_ns, end_ns; /* wall clock */
	struct otlp_attr attrs[OTLP_ATTRS_MAX];
	unsigned n_attrs;
};

struct smuxfs_otlp {
	struct smux_tracer tracer;
	char *url;
	struct smuxfs_sendq *q; /* finished spans, oldest first */
};

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void random_bytes(uint8_t *p, size_t n)
{
	while (n) {
		ssize_t got = getrandom(p, n, 0);

		if (got <= 0)
			break;
		p += got;
		n -= (size_t)got;
	}
}

static struct smux_span *otlp_start(void *arg, const char *name,
				    struct smux_span *parent)
{
	struct smux_span *s = calloc(1, sizeof(*s));

	(void)arg;
	if (!s)
		return NULL;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if (parent) {
		memcpy(s->trace_id, parent->trace_id, sizeof(s->trace_id));
		memcpy(s->parent_id, parent->span_id, sizeof(s->parent_id));
		s->has_parent = true;
	} else {
		random_bytes(s->trace_id, sizeof(s->trace_id));
	}
	random_bytes(s->span_id, sizeof(s->span_id));
	s->start_ns = wall_ns();
	return s;
}

static struct otlp_attr *attr_slot(struct smux_span *s, const char *key)
{
	struct otlp_attr *a;

	if (!s || s->n_attrs == OTLP_ATTRS_MAX)
		return NULL;
	a = &s->attrs[s->n_attrs++];
	snprintf(a->key, sizeof(a->key), "%s", key);
	return a;
}

static void otlp_set_str(void *arg, struct smux_span *s, const char *attr,
			 const char *value)
{
	struct otlp_attr *a = attr_slot(s, attr);

	(void)arg;
	if (a)
		snprintf(a->s, sizeof(a->s), "%s", value ? value : "");
}

static void otlp_set_int(void *arg, struct smux_span *s, const char *attr,
			 int64_t value)
{
	struct otlp_attr *a = attr_slot(s, attr);

	(void)arg;
	if (a) {
		a->is_int = true;
		a->i = value;
	}
}

static void otlp_end(void *arg, struct smux_span *s)
{
	struct smuxfs_otlp *o = arg;

	if (!s)
		return;
	s->end_ns = wall_ns();
	smuxfs_sendq_push(o->q, s); /* full: dropped and counted */
}

static void hex(char *out, const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* One span as OTLP JSON (ids in hex, times as decimal strings). */
static json_t *span_json(const struct smux_span *s)
{
	char tid[33], sid[17], pid[17], t0[24], t1[24];
	json_t *attrs = json_array(), *j;

	hex(tid, s->trace_id, sizeof(s->trace_id));
	hex(sid, s->span_id, sizeof(s->span_id));
	snprintf(t0, sizeof(t0), "%lld", (long long)s->start_ns);
	snprintf(t1, sizeof(t1), "%lld", (long long)s->end_ns);
	for (unsigned i = 0; attrs && i < s->n_attrs; i++) {
		const struct otlp_attr *a = &s->attrs[i];
		char num[24];
		json_t *v;

		snprintf(num, sizeof(num), "%lld", (long long)a->i);
		v = a->is_int ? json_pack("{s:s}", "intValue", num)
			      : json_pack("{s:s}", "stringValue", a->s);
		json_array_append_new(attrs, json_pack("{s:s, s:o}", "key",
						       a->key, "value", v));
	}
	j = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o}", "traceId", tid,
		      "spanId", sid, "name", s->name, "kind", 1,
		      "startTimeUnixNano", t0, "endTimeUnixNano", t1,
		      "attributes", attrs ? attrs : json_array());
	if (j && s->has_parent) {
		hex(pid, s->parent_id, sizeof(s->parent_id));
		json_object_set_new(j, "parentSpanId", json_string(pid));
	}
	return j;
}

/* sendq's send, on its thread: POSTs @n spans as one
 * ExportTraceServiceRequest; true when the collector took it (2xx). */
static bool export_batch(void *arg, void **spans, unsigned n)
{
	struct smuxfs_otlp *o = arg;
	json_t *list = json_array(), *req;
	struct curl_slist *hdr = NULL;
	long status = 0;
	char *body;
	CURL *c;

	for (unsigned i = 0; list && i < n; i++)
		json_array_append_new(list, span_json(spans[i]));
	req = json_pack("{s:[{s:{s:[{s:s, s:{s:s}}]}, s:[{s:{s:s}, s:o}]}]}",
			"resourceSpans", "resource", "attributes", "key",
			"service.name", "value", "stringValue", "smuxfs",
			"scopeSpans", "scope", "name", "smuxfs", "spans",
			list ? list : json_array());
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	c = body ? curl_easy_init() : NULL;
	if (c) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_URL, o->url);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT, OTLP_TIMEOUT_S);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 2L);
		if (curl_easy_perform(c) == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_slist_free_all(hdr);
		curl_easy_cleanup(c);
	}
	free(body);
	return status >= 200 && status < 300;
}

int smuxfs_otlp_start(struct smuxfs *fs, const char *endpoint)
{
	struct smuxfs_sendq_conf qc = {.max = OTLP_QUEUE_MAX,
				       .batch = OTLP_BATCH,
				       .flush_ms = OTLP_FLUSH_MS,
				       .send = export_batch,
				       .free_item = free};
	struct smuxfs_otlp *o;
	size_t len;
	int rc;

	if (!endpoint)
		return 0;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	len = strlen(endpoint);
	while (len && endpoint[len - 1] == '/')
		len--;
	if (asprintf(&o->url, "%.*s/v1/traces", (int)len, endpoint) < 0) {
		free(o);
		return -ENOMEM;
	}
	o->tracer = (struct smux_tracer){.start = otlp_start,
					 .set_str = otlp_set_str,
					 .set_int = otlp_set_int,
					 .end = otlp_end,
					 .arg = o};
	qc.arg = o;
	rc = smuxfs_sendq_start(&qc, &o->q);
	if (rc) {
		free(o->url);
		free(o);
		return rc;
	}
	fs->otlp = o;
	smux_log(LOG_INFO, "spans exported to %s (OTLP/HTTP JSON)", o->url);
	return 0;
}

const struct smux_tracer *smuxfs_otlp_tracer(struct smuxfs *fs)
{
	return fs->otlp ? &fs->otlp->tracer : NULL;
}

void smuxfs_otlp_stop(struct smuxfs *fs)
{
	struct smuxfs_otlp *o = fs->otlp;
	struct smuxfs_sendq_counts n;

	if (!o)
		return;
	smuxfs_sendq_stop(o->q, &n); /* what is queued still goes out */
	if (n.dropped || n.failed)
		smux_log(LOG_WARNING,
			 "OTLP: %llu span(s) sent, %llu dropped (queue full), "
			 "%llu not delivered (the collector refused or missed "
			 "%llu batch(es))",
			 (unsigned long long)n.sent,
			 (unsigned long long)n.dropped,
			 (unsigned long long)n.failed,
			 (unsigned long long)n.failed_sends);
	free(o->url);
	free(o);
	fs->otlp = NULL;
}
