/* SPDX-License-Identifier: MIT */
/*
 * trace.c - the no-op-safe wrappers of smux/trace.h (seed section 9.1).
 *
 * Owns nothing but the NULL checks: a missing tracer, or a tracer without
 * a given hook, turns each call into one branch. Spans belong to the
 * tracer; these wrappers never look inside one.
 */
#include <stddef.h>

#include "smux/trace.h"

struct smux_span *smux_span_start(const struct smux_tracer *t, const char *name,
				  struct smux_span *parent)
{
	if (!t || !t->start)
		return NULL;
	return t->start(t->arg, name, parent);
}

void smux_span_str(const struct smux_tracer *t, struct smux_span *s,
		   const char *attr, const char *value)
{
	if (t && t->set_str)
		t->set_str(t->arg, s, attr, value);
}

void smux_span_int(const struct smux_tracer *t, struct smux_span *s,
		   const char *attr, int64_t value)
{
	if (t && t->set_int)
		t->set_int(t->arg, s, attr, value);
}

void smux_span_end(const struct smux_tracer *t, struct smux_span *s)
{
	if (t && t->end)
		t->end(t->arg, s);
}
