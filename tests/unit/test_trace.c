// SPDX-License-Identifier: MIT
/*
 * test_trace.c - the tracing wrappers (src/core/trace.c): a recording
 * tracer sees every call with its arguments; a NULL tracer, a tracer with
 * NULL hooks and a tracer that starts no span are harmless.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smux/trace.h"

#define LOG_MAX 32

struct smux_span {
	char name[64];
	struct smux_span *parent;
	bool ended;
};

struct recorder {
	unsigned n;
	char log[LOG_MAX][128]; /* one line per hook call */
	struct smux_span spans[8];
	unsigned n_spans;
	bool start_returns_null;
};

static void rec_log(struct recorder *r, const char *line)
{
	assert_true(r->n < LOG_MAX);
	snprintf(r->log[r->n++], sizeof(r->log[0]), "%s", line);
}

static const char *span_name(const struct smux_span *s)
{
	return s ? s->name : "(null)";
}

static struct smux_span *rec_start(void *arg, const char *name,
				   struct smux_span *parent)
{
	struct recorder *r = arg;
	struct smux_span *s;
	char line[128];

	snprintf(line, sizeof(line), "start %s parent=%s", name,
		 span_name(parent));
	rec_log(r, line);
	if (r->start_returns_null)
		return NULL;
	assert_true(r->n_spans < 8);
	s = &r->spans[r->n_spans++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->parent = parent;
	return s;
}

static void rec_set_str(void *arg, struct smux_span *s, const char *attr,
			const char *value)
{
	char line[128];

	snprintf(line, sizeof(line), "str %s %s=%s", span_name(s), attr, value);
	rec_log(arg, line);
}

static void rec_set_int(void *arg, struct smux_span *s, const char *attr,
			int64_t value)
{
	char line[128];

	snprintf(line, sizeof(line), "int %s %s=%lld", span_name(s), attr,
		 (long long)value);
	rec_log(arg, line);
}

static void rec_end(void *arg, struct smux_span *s)
{
	char line[128];

	snprintf(line, sizeof(line), "end %s", span_name(s));
	rec_log(arg, line);
	if (s) {
		assert_false(s->ended);
		s->ended = true;
	}
}

static void test_records_hierarchy(void **state)
{
	struct recorder r = {0};
	struct smux_tracer t = {rec_start, rec_set_str, rec_set_int, rec_end,
				&r};
	struct smux_span *op, *att;

	(void)state;
	op = smux_span_start(&t, "storage-mux.get", NULL);
	assert_non_null(op);
	smux_span_str(&t, op, "mux.mode", "failover");
	att = smux_span_start(&t, "storage-mux.attempt", op);
	assert_non_null(att);
	assert_ptr_equal(att->parent, op);
	smux_span_int(&t, att, "mux.attempt.index", 0);
	smux_span_int(&t, att, "mux.latency.ms", -12345678901LL);
	smux_span_str(&t, att, "mux.outcome", "ok");
	smux_span_end(&t, att);
	smux_span_end(&t, op);

	assert_int_equal(r.n, 8);
	assert_string_equal(r.log[0], "start storage-mux.get parent=(null)");
	assert_string_equal(r.log[1], "str storage-mux.get mux.mode=failover");
	assert_string_equal(r.log[2],
			    "start storage-mux.attempt parent=storage-mux.get");
	assert_string_equal(r.log[3],
			    "int storage-mux.attempt mux.attempt.index=0");
	assert_string_equal(
		r.log[4],
		"int storage-mux.attempt mux.latency.ms=-12345678901");
	assert_string_equal(r.log[5], "str storage-mux.attempt mux.outcome=ok");
	assert_string_equal(r.log[6], "end storage-mux.attempt");
	assert_string_equal(r.log[7], "end storage-mux.get");
	assert_true(r.spans[0].ended);
	assert_true(r.spans[1].ended);
}

static void test_null_tracer(void **state)
{
	struct smux_span *s;

	(void)state;
	s = smux_span_start(NULL, "storage-mux.put", NULL);
	assert_null(s);
	smux_span_str(NULL, s, "mux.key", "a/b");
	smux_span_int(NULL, s, "mux.attempt.index", 1);
	smux_span_end(NULL, s);
}

static void test_null_hooks(void **state)
{
	struct recorder r = {0};
	struct smux_tracer only_end = {.end = rec_end, .arg = &r};
	struct smux_tracer none = {0};
	struct smux_span *s;

	(void)state;
	s = smux_span_start(&only_end, "x", NULL);
	assert_null(s);
	smux_span_str(&only_end, s, "a", "b");
	smux_span_int(&only_end, s, "a", 1);
	smux_span_end(&only_end, s);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.log[0], "end (null)");

	s = smux_span_start(&none, "x", NULL);
	assert_null(s);
	smux_span_str(&none, s, "a", "b");
	smux_span_int(&none, s, "a", 1);
	smux_span_end(&none, s);
}

/* A tracer that starts no span still sees the later hooks, with NULL. */
static void test_start_returns_null(void **state)
{
	struct recorder r = {.start_returns_null = true};
	struct smux_tracer t = {rec_start, rec_set_str, rec_set_int, rec_end,
				&r};
	struct smux_span *s;

	(void)state;
	s = smux_span_start(&t, "storage-mux.head", NULL);
	assert_null(s);
	smux_span_str(&t, s, "mux.key", "k");
	smux_span_end(&t, s);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.log[1], "str (null) mux.key=k");
	assert_string_equal(r.log[2], "end (null)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_hierarchy),
		cmocka_unit_test(test_null_tracer),
		cmocka_unit_test(test_null_hooks),
		cmocka_unit_test(test_start_returns_null),
	};

	return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
