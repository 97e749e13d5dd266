/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - .smux/metrics: what .smux/stats shows, in the Prometheus
 * text exposition format (version 0.0.4), so node_exporter's textfile
 * collector, or a scrape through a small sidecar, reads it (issue 11
 * item 3).
 *
 * Owns: the metric names and their help texts. Every series of a mux
 * carries the labels mux (its name) and path (the muxes from the root
 * down to it, joined by "/"); a backend's series add backend. Latencies
 * are in seconds (Prometheus base units); the seed's p50/p99 become the
 * gauges smux_backend_latency_p50_seconds and ..._p99_seconds. A backend's
 * state is a state set: smux_backend_state{state="up"|"down"|"draining"}
 * with 1 on the current one, plus smux_backend_up (1 when up). Label
 * values are escaped as the format asks (backslash, quote, newline), so a
 * name cannot forge a series.
 *
 * The text is built from one stats snapshot (smux_mux_stats), grouped by
 * metric: each metric's HELP and TYPE once, then its series for every mux
 * and backend of the tree.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/mux.h"

/* What a metric reads from the snapshot. */
enum metric_of {
	OF_MUX,	    /* one series per mux */
	OF_BACKEND, /* one series per member of every mux */
	OF_STATE,   /* one series per member and state (a state set) */
	OF_UP,	    /* one series per member: 1 when up */
};

/* How the field at the metric's offset is stored. */
enum metric_field {
	F_U64,	    /* uint64_t count */
	F_UINT,	    /* unsigned count */
	F_MS,	    /* double milliseconds, shown in seconds */
	F_CLOCK_MS, /* int64_t clock milliseconds, shown in seconds */
	F_WEIGHT,   /* double, only where has_weight */
};

struct metric {
	const char *name;
	const char *type; /* "counter" or "gauge" */
	const char *help;
	enum metric_field field;
	enum metric_of of;
	size_t off; /* in struct smux_mux_stats (OF_MUX) or
		       struct smux_backend_stats */
};

#define MUX(f)	   OF_MUX, offsetof(struct smux_mux_stats, f)
#define BACKEND(f) OF_BACKEND, offsetof(struct smux_backend_stats, f)

static const struct metric metrics[] = {
	{"smux_mux_calls_total", "counter", "Operations the mux served.", F_U64,
	 MUX(total_calls)},
	{"smux_mux_failovers_total", "counter",
	 "Calls that moved on to another backend after a failure.", F_U64,
	 MUX(total_failovers)},
	{"smux_mux_fanout_partials_total", "counter",
	 "Fan-out writes acknowledged while some replica failed (hinted).",
	 F_U64, MUX(total_fanout_partials)},
	{"smux_mux_pending_hints", "gauge",
	 "Hints (writes a replica missed) not yet replayed.", F_UINT,
	 MUX(pending_hints)},
	{"smux_mux_backends", "gauge", "Members of the mux.", F_UINT,
	 MUX(n_backends)},
	{"smux_backend_up", "gauge", "1 when the backend is up, else 0.",
	 F_UINT, OF_UP, 0},
	{"smux_backend_state", "gauge",
	 "The backend's state: 1 on the current one of up, down, draining.",
	 F_UINT, OF_STATE, 0},
	{"smux_backend_hits_total", "counter", "Successful backend calls.",
	 F_U64, BACKEND(hits)},
	{"smux_backend_misses_total", "counter",
	 "Backend calls answered with not found.", F_U64, BACKEND(misses)},
	{"smux_backend_errors_total", "counter",
	 "Failed backend calls, timeouts included.", F_U64, BACKEND(errors)},
	{"smux_backend_timeouts_total", "counter",
	 "Backend calls that ran past the deadline.", F_U64, BACKEND(timeouts)},
	{"smux_backend_last_latency_seconds", "gauge",
	 "Latency of the backend's last call.", F_MS, BACKEND(last_latency_ms)},
	{"smux_backend_latency_p50_seconds", "gauge",
	 "Median latency of the backend's recent calls.", F_MS,
	 BACKEND(p50_latency_ms)},
	{"smux_backend_latency_p99_seconds", "gauge",
	 "99th percentile latency of the backend's recent calls.", F_MS,
	 BACKEND(p99_latency_ms)},
	{"smux_backend_consecutive_failures", "gauge",
	 "Failures in a row since the backend's last success.", F_UINT,
	 BACKEND(consecutive_failures)},
	{"smux_backend_in_flight", "gauge", "Backend calls running now.",
	 F_UINT, BACKEND(in_flight_count)},
	{"smux_backend_last_transition_timestamp_seconds", "gauge",
	 "When the backend last changed state (0: never).", F_CLOCK_MS,
	 BACKEND(last_transition_at)},
	{"smux_backend_weight", "gauge",
	 "The backend's weight (weighted mode).", F_WEIGHT, BACKEND(weight)},
};

/* The value of @m's field in the struct at @base. */
static double field_value(const struct metric *m, const void *base)
{
	const char *p = (const char *)base + m->off;
	uint64_t u64;
	int64_t i64;
	unsigned u;
	double d;

	switch (m->field) {
	case F_U64:
		memcpy(&u64, p, sizeof(u64));
		return (double)u64;
	case F_UINT:
		memcpy(&u, p, sizeof(u));
		return (double)u;
	case F_CLOCK_MS:
		memcpy(&i64, p, sizeof(i64));
		return (double)i64 / 1000.0;
	case F_MS:
		memcpy(&d, p, sizeof(d));
		return d / 1000.0;
	case F_WEIGHT:
		break;
	}
	memcpy(&d, p, sizeof(d));
	return d;
}

#define N_METRICS (sizeof(metrics) / sizeof(metrics[0]))

/* Writes @s as a label value: backslash, double quote and newline
 * escaped, as the exposition format asks. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* A number the way Prometheus reads it (%.17g round-trips a double). */
static void put_value(FILE *f, double v)
{
	fprintf(f, " %.17g\n", v);
}

/* Starts a series of @m: its name and the labels of mux @s at @path
 * (and of backend @b). */
static void put_labels(FILE *f, const struct metric *m,
		       const struct smux_mux_stats *s, const char *path,
		       const struct smux_backend_stats *b)
{
	fprintf(f, "%s{mux=\"", m->name);
	put_label(f, s->name);
	fputs("\",path=\"", f);
	put_label(f, path);
	if (b) {
		fputs("\",backend=\"", f);
		put_label(f, b->name);
	}
	fputc('"', f);
}

/* The series of metric @m for the mux @s at @path, then for the muxes
 * under it. */
static void put_series(FILE *f, const struct metric *m,
		       const struct smux_mux_stats *s, const char *path)
{
	static const enum smux_status states[] = {
		SMUX_STATUS_UP, SMUX_STATUS_DOWN, SMUX_STATUS_DRAINING};

	if (m->of == OF_MUX) {
		put_labels(f, m, s, path, NULL);
		fputc('}', f);
		put_value(f, field_value(m, s));
	}
	for (unsigned i = 0; i < s->n_backends && m->of != OF_MUX; i++) {
		const struct smux_backend_stats *b = &s->backends[i];

		if (m->of == OF_STATE) {
			for (unsigned k = 0; k < 3; k++) {
				put_labels(f, m, s, path, b);
				fprintf(f, ",state=\"%s\"}",
					smux_status_name(states[k]));
				put_value(f, b->status == states[k] ? 1 : 0);
			}
			continue;
		}
		if (m->field == F_WEIGHT && !b->has_weight)
			continue;
		put_labels(f, m, s, path, b);
		fputc('}', f);
		put_value(f, m->of == OF_UP ? (b->status == SMUX_STATUS_UP)
					    : field_value(m, b));
	}
	for (unsigned i = 0; i < s->n_backends; i++) {
		const struct smux_mux_stats *c = s->backends[i].child;
		char *sub;

		if (!c || asprintf(&sub, "%s/%s", path, c->name) < 0)
			continue;
		put_series(f, m, c, sub);
		free(sub);
	}
}

/* One series of the daemon's own counters. */
struct own_row {
	const char *name, *type, *help;
	uint64_t v;
};

static void put_rows(FILE *f, const struct own_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n",
			rows[i].name, rows[i].help, rows[i].name, rows[i].type,
			rows[i].name, (unsigned long long)rows[i].v);
}

/* The read cache's series (0 when it is off). */
static void put_read_cache(FILE *f, struct smuxfs *fs)
{
	struct smuxfs_rcache_stats st = {0};

	if (fs->rcache)
		smuxfs_rcache_stats(fs->rcache, &st);
	const struct own_row rows[] = {
		{"smux_read_cache_capacity_bytes", "gauge",
		 "Bytes the read cache may hold.", st.capacity},
		{"smux_read_cache_bytes", "gauge",
		 "Bytes the read cache holds.", st.bytes},
		{"smux_read_cache_entries", "gauge",
		 "Objects cached or being filled.", st.entries},
		{"smux_read_cache_hits_total", "counter",
		 "Reads served from the cache.", st.hits},
		{"smux_read_cache_misses_total", "counter", "Fills started.",
		 st.misses},
		{"smux_read_cache_fills_total", "counter", "Fills completed.",
		 st.fills},
		{"smux_read_cache_fill_failures_total", "counter",
		 "Fills that failed (the read went through).",
		 st.fill_failures},
		{"smux_read_cache_fill_bytes_total", "counter",
		 "Bytes fetched by completed fills.", st.fill_bytes},
		{"smux_read_cache_bypassed_total", "counter",
		 "Reads the cache did not serve.", st.bypassed},
		{"smux_read_cache_evictions_total", "counter",
		 "Objects dropped for room.", st.evictions},
	};

	put_rows(f, rows, sizeof(rows) / sizeof(rows[0]));
}

/* The delete queue's series (delq.c; 0 when it is off). */
static void put_delete_queue(FILE *f, struct smuxfs *fs)
{
	struct smuxfs_delq_counts c;

	smuxfs_delq_counts(fs, &c);
	const struct own_row rows[] = {
		{"smux_delete_queue_names", "gauge",
		 "Unlinked names whose delete is queued or being sent.",
		 c.queued},
		{"smux_delete_queue_batches_total", "counter",
		 "Batch deletes sent.", c.batches},
		{"smux_delete_queue_deleted_total", "counter",
		 "Unlinked names deleted from the store.", c.deleted},
		{"smux_delete_queue_dropped_total", "counter",
		 "Deletes the store refused (the name shows again).",
		 c.dropped},
		{"smux_delete_queue_retried_total", "counter",
		 "Deletes that failed and were kept to send again.", c.retried},
	};

	put_rows(f, rows, sizeof(rows) / sizeof(rows[0]));
}

/* The kernel's requests by opcode (fnode.c), those it sent at least once,
 * and the time the daemon took to answer them; op="other" counts the
 * opcodes without a name. */
static void put_fuse_requests(FILE *f, struct smuxfs *fs)
{
	uint64_t n[SMUXFS_FUSE_OPCODES], ns[SMUXFS_FUSE_OPCODES];
	const char *name[SMUXFS_FUSE_OPCODES];

	for (unsigned op = 0; op < SMUXFS_FUSE_OPCODES; op++) {
		n[op] = smuxfs_fnode_requests(fs, op, &name[op], &ns[op]);
		if (op == SMUXFS_FUSE_OPCODES - 1)
			name[op] = "other";
	}
	fputs("# HELP smux_fuse_requests_total Requests the kernel sent to the "
	      "mount, by operation.\n"
	      "# TYPE smux_fuse_requests_total counter\n",
	      f);
	for (unsigned op = 0; op < SMUXFS_FUSE_OPCODES; op++)
		if (name[op][0] && n[op])
			fprintf(f, "smux_fuse_requests_total{op=\"%s\"} %llu\n",
				name[op], (unsigned long long)n[op]);
	fputs("# HELP smux_fuse_request_seconds_total Time the daemon took to "
	      "answer them, from reading a request to writing its reply.\n"
	      "# TYPE smux_fuse_request_seconds_total counter\n",
	      f);
	for (unsigned op = 0; op < SMUXFS_FUSE_OPCODES; op++)
		if (name[op][0] && n[op]) {
			fprintf(f, "smux_fuse_request_seconds_total{op=\"%s\"}",
				name[op]);
			put_value(f, (double)ns[op] / 1e9);
		}
	fprintf(f,
		"# HELP smux_fuse_passthrough_opens_total Opens the kernel "
		"serves itself, reading and writing the backend file "
		"(passthrough.c).\n"
		"# TYPE smux_fuse_passthrough_opens_total counter\n"
		"smux_fuse_passthrough_opens_total %llu\n"
		"# HELP smux_fuse_passthrough_backings_total Files registered "
		"with the kernel for passthrough (a writer's file once while "
		"it stays open or kept, not once per open).\n"
		"# TYPE smux_fuse_passthrough_backings_total counter\n"
		"smux_fuse_passthrough_backings_total %llu\n"
		"# HELP smux_fuse_passthrough_backings Files registered "
		"for passthrough now (each holds its file open).\n"
		"# TYPE smux_fuse_passthrough_backings gauge\n"
		"smux_fuse_passthrough_backings %d\n",
		(unsigned long long)atomic_load(&fs->pt.opens),
		(unsigned long long)atomic_load(&fs->pt.backings),
		atomic_load(&fs->pt.registered));
}

int smuxfs_metrics_render(struct smuxfs *fs, char **data, size_t *len)
{
	struct smux_mux_stats *st = NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	if (smux_is_mux(fs->root)) {
		st = smux_mux_stats(fs->root);
		if (!st)
			return -ENOMEM;
	}
	f = open_memstream(&buf, &n);
	if (!f) {
		smux_mux_stats_free(st);
		return -ENOMEM;
	}
	for (size_t i = 0; st && i < N_METRICS; i++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metrics[i].name,
			metrics[i].help, metrics[i].name, metrics[i].type);
		put_series(f, &metrics[i], st, st->name);
	}
	put_read_cache(f, fs);
	put_delete_queue(f, fs);
	put_fuse_requests(f, fs);
	smux_mux_stats_free(st);
	if (fclose(f) != 0 || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*data = buf;
	*len = n;
	return 0;
}
