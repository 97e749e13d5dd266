/* SPDX-License-Identifier: MIT */
/*
 * smux/trace.h - tracing hooks (seed section 9.1).
 *
 * The mux opens a span "storage-mux.<operation>" per operation (attributes
 * mux.mode, mux.key, mux.policy) and a child "storage-mux.attempt" per
 * backend attempt (mux.backend.name, mux.attempt.index, mux.mode,
 * mux.outcome in {ok, transient, semantic, abort, timeout},
 * mux.latency.ms). A tracer is a small table of callbacks; without one every
 * hook is a no-op costing one branch. An exporter plugs in here later.
 */
#ifndef SMUX_TRACE_H
#define SMUX_TRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct smux_span; /* opaque, owned by the tracer */

struct smux_tracer {
	/* Starts a span named @name under @parent (NULL: a root span).
	 * May return NULL (then the other hooks get NULL). */
	struct smux_span *(*start)(void *arg, const char *name,
				   struct smux_span *parent);
	void (*set_str)(void *arg, struct smux_span *s, const char *attr,
			const char *value);
	void (*set_int)(void *arg, struct smux_span *s, const char *attr,
			int64_t value);
	/* Ends and releases the span. */
	void (*end)(void *arg, struct smux_span *s);
	void *arg;
};

/* Wrappers: a NULL tracer (or NULL hook) makes each a no-op. */
struct smux_span *smux_span_start(const struct smux_tracer *t, const char *name,
				  struct smux_span *parent);
void smux_span_str(const struct smux_tracer *t, struct smux_span *s,
		   const char *attr, const char *value);
void smux_span_int(const struct smux_tracer *t, struct smux_span *s,
		   const char *attr, int64_t value);
void smux_span_end(const struct smux_tracer *t, struct smux_span *s);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_TRACE_H */
