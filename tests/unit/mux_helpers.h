/* SPDX-License-Identifier: MIT */
/*
 * mux_helpers.h - what the mux tests (test_mux_*.c) share: building
 * members and muxes, small put/get helpers, an event recorder, an
 * injectable clock and a recording tracer. Header-only (static inline), so
 * each test binary stays one .c file.
 *
 * Include <cmocka.h> and its prerequisites first.
 */
#ifndef SMUX_TESTS_MUX_HELPERS_H
#define SMUX_TESTS_MUX_HELPERS_H

#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smux/events.h"
#include "smux/faulty.h"
#include "smux/memory.h"
#include "smux/mux.h"
#include "smux/trace.h"

#define MS_NS 1000000LL

/* Prints @err (if any) and fails the test when @rc is not 0. */
#define MH_OK(rc, err) mh_ok_at((long)(rc), (err), __FILE__, __LINE__)
static inline void mh_ok_at(long rc, const struct smux_error *err,
			    const char *file, int line)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	if (rc == 0)
		return;
	print_error("expected success, got %ld: %s\n", rc,
		    err ? smux_error_format(err, buf, sizeof(buf)) : "");
	_fail(file, line);
}

/* Asserts a failure with @code (and the code's errno as -rc). */
#define MH_ERR(rc, err, code) \
	mh_err_at((long)(rc), (err), (code), __FILE__, __LINE__)
static inline void mh_err_at(long rc, const struct smux_error *err,
			     enum smux_code code, const char *file, int line)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	if (rc < 0 && err->e.code == code && rc == -err->e.sys_errno)
		return;
	print_error("expected %s, got rc %ld: %s\n", smux_code_name(code), rc,
		    smux_error_format(err, buf, sizeof(buf)));
	_fail(file, line);
}

static inline struct smux_backend *mh_memory(const char *name)
{
	struct smux_backend *b = NULL;
	struct smux_error err;

	MH_OK(smux_memory_new(name, &b, &err), &err);
	return b;
}

/* A faulty wrapper of @inner (NULL @opts: no faults). */
static inline struct smux_backend *
mh_faulty(const char *name, struct smux_backend *inner,
	  const struct smux_faulty_opts *opts)
{
	struct smux_faulty_opts none = {0};
	struct smux_backend *b = NULL;
	struct smux_error err;

	MH_OK(smux_faulty_new(name, inner, opts ? opts : &none, &b, &err),
	      &err);
	return b;
}

/* Sets a faulty backend to fail every call transiently (rate 1) or not. */
static inline void mh_fail(struct smux_backend *fb, bool failing)
{
	struct smux_faulty_opts o = {.error_rate = failing ? 1.0 : 0.0};

	smux_faulty_set(fb, &o);
}

/*
 * A mux over @n backends (weights from @weights when not NULL). The mux
 * takes its own references; the caller keeps its own.
 */
static inline struct smux_backend *mh_mux(const char *name,
					  const struct smux_mux_opts *opts,
					  struct smux_backend *const *bs,
					  const double *weights, unsigned n)
{
	struct smux_mux_member m[16];
	struct smux_backend *mux = NULL;
	struct smux_error err;

	assert_true(n <= 16);
	memset(m, 0, sizeof(m));
	for (unsigned i = 0; i < n; i++) {
		m[i].backend = bs[i];
		m[i].has_weight = weights != NULL;
		m[i].weight = weights ? weights[i] : 0;
	}
	MH_OK(smux_mux_new(name, opts, m, n, &mux, &err), &err);
	return mux;
}

static inline int mh_put(struct smux_backend *b, const char *key, const char *s,
			 struct smux_error *err)
{
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	return smux_backend_put_buf(b, &ctx, key, s, strlen(s), err);
}

/* Whole object as a NUL-terminated heap string (free()), or NULL with
 * *@rc and @err telling why. */
static inline char *mh_get(struct smux_backend *b, const char *key, int *rc,
			   struct smux_error *err)
{
	unsigned char *buf = NULL;
	struct smux_ctx ctx;
	size_t len;
	int r;

	smux_ctx_init(&ctx);
	r = smux_backend_get_all(b, &ctx, key, &buf, &len, err);
	if (rc)
		*rc = r;
	return r ? NULL : (char *)buf;
}

/* Asserts @b holds @key with content @want. */
#define MH_HOLDS(b, key, want) \
	mh_holds_at((b), (key), (want), __FILE__, __LINE__)
static inline void mh_holds_at(struct smux_backend *b, const char *key,
			       const char *want, const char *file, int line)
{
	struct smux_error err;
	int rc;
	char *got = mh_get(b, key, &rc, &err);
	int same;

	mh_ok_at(rc, &err, file, line);
	same = strcmp(got, want) == 0;
	if (!same)
		print_error("%s on %s: got \"%s\", want \"%s\"\n", key, b->name,
			    got, want);
	free(got);
	if (!same)
		_fail(file, line);
}

/* Asserts @b does not hold @key. */
#define MH_LACKS(b, key) mh_lacks_at((b), (key), __FILE__, __LINE__)
static inline void mh_lacks_at(struct smux_backend *b, const char *key,
			       const char *file, int line)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	int rc;

	smux_ctx_init(&ctx);
	rc = smux_backend_head(b, &ctx, key, &info, &err);
	if (rc == 0 || err.e.code != SMUX_E_KEY_NOT_FOUND) {
		print_error("%s on %s: expected KEY_NOT_FOUND, got %d\n", key,
			    b->name, rc);
		_fail(file, line);
	}
}

/* ---- an event recorder ---- */

#define MH_EVENTS_MAX 1024

struct mh_events {
	struct smux_events *bus;
	int sub;
	pthread_mutex_t lock;
	unsigned n;			  /* protected by lock */
	struct smux_event *ev;		  /* MH_EVENTS_MAX; protected by lock */
	unsigned count[SMUX_TOPIC_COUNT]; /* protected by lock */
};

static inline void mh_events_cb(void *arg, const struct smux_event *ev)
{
	struct mh_events *r = arg;

	pthread_mutex_lock(&r->lock);
	if (r->n < MH_EVENTS_MAX)
		r->ev[r->n++] = *ev;
	if ((unsigned)ev->topic < SMUX_TOPIC_COUNT)
		r->count[ev->topic]++;
	pthread_mutex_unlock(&r->lock);
}

static inline struct mh_events *mh_events_new(void)
{
	struct mh_events *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->ev = calloc(MH_EVENTS_MAX, sizeof(*r->ev));
	assert_non_null(r->ev);
	pthread_mutex_init(&r->lock, NULL);
	r->bus = smux_events_new();
	assert_non_null(r->bus);
	r->sub = smux_events_subscribe(r->bus, mh_events_cb, r);
	assert_true(r->sub > 0);
	return r;
}

static inline void mh_events_free(struct mh_events *r)
{
	if (!r)
		return;
	smux_events_free(r->bus);
	pthread_mutex_destroy(&r->lock);
	free(r->ev);
	free(r);
}

/* Delivers what was emitted, then counts @topic events. */
static inline unsigned mh_events_count(struct mh_events *r,
				       enum smux_topic topic)
{
	unsigned n;

	smux_events_flush(r->bus);
	pthread_mutex_lock(&r->lock);
	n = r->count[topic];
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* Copies the last event of @topic into @out; false when there is none. */
static inline bool mh_events_last(struct mh_events *r, enum smux_topic topic,
				  struct smux_event *out)
{
	bool found = false;

	memset(out, 0, sizeof(*out)); /* defined even when nothing matches */
	smux_events_flush(r->bus);
	pthread_mutex_lock(&r->lock);
	for (unsigned i = r->n; i-- > 0;) {
		if (r->ev[i].topic == topic) {
			*out = r->ev[i];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return found;
}

/* ---- an injected clock ---- */

struct mh_clock {
	struct smux_clock clock;
	atomic_llong now_ms;
};

static inline int64_t mh_clock_now(void *arg)
{
	struct mh_clock *c = arg;

	return atomic_load(&c->now_ms);
}

static inline void mh_clock_init(struct mh_clock *c, int64_t start_ms)
{
	c->clock.now_ms = mh_clock_now;
	c->clock.arg = c;
	atomic_init(&c->now_ms, start_ms);
}

static inline void mh_clock_set(struct mh_clock *c, int64_t ms)
{
	atomic_store(&c->now_ms, ms);
}

/* ---- runtime membership and repair ---- */

/* The faulty backend @fb refuses puts and deletes (a semantic failure: it
 * stays up and gets hints), or takes them again. */
static inline void mh_refuse_writes(struct smux_backend *fb, bool refuse)
{
	struct smux_faulty_opts o = {
		.semantic_rate = refuse ? 1.0 : 0.0,
		.ops = 1u << SMUX_FAULTY_PUT | 1u << SMUX_FAULTY_DEL,
	};

	smux_faulty_set(fb, &o);
}

/* Adds @b to @mux at run time (back, after a remove). */
static inline void mh_add_back(struct smux_backend *mux, struct smux_backend *b)
{
	struct smux_mux_member back = {.backend = b};
	struct smux_error err;

	MH_OK(smux_mux_add(mux, &back, &err), &err);
}

/* Repair passes of @mux (@clk moved past every cooldown first) until
 * nothing is pending, at most @rounds; returns what is left pending. A
 * pass may fail (a hint with no replica to copy from): the hint stays. */
static inline unsigned mh_repair(struct smux_backend *mux, struct mh_clock *clk,
				 int rounds)
{
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;

	smux_ctx_init(&ctx);
	for (int r = 0; r < rounds && pending; r++) {
		mh_clock_set(clk, atomic_load(&clk->now_ms) + 60000);
		smux_mux_check_health(mux);
		if (smux_mux_repair(mux, &ctx, NULL, &pending, &err) < 0)
			pending = smux_mux_pending_hints(mux);
	}
	return pending;
}

/* ---- a recording tracer ---- */

#define MH_SPAN_ATTRS 16
#define MH_SPANS_MAX  256

struct smux_span {
	char name[48];
	struct smux_span *parent;
	unsigned n_attrs;
	char attr[MH_SPAN_ATTRS][32];
	char str[MH_SPAN_ATTRS][64];
	int64_t num[MH_SPAN_ATTRS];
	bool is_int[MH_SPAN_ATTRS];
	bool ended;
};

struct mh_tracer {
	struct smux_tracer t;
	pthread_mutex_t lock;
	unsigned n; /* protected by lock */
	struct smux_span spans[MH_SPANS_MAX];
};

static inline struct smux_span *mh_span_start(void *arg, const char *name,
					      struct smux_span *parent)
{
	struct mh_tracer *tr = arg;
	struct smux_span *s = NULL;

	pthread_mutex_lock(&tr->lock);
	if (tr->n < MH_SPANS_MAX) {
		s = &tr->spans[tr->n++];
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->parent = parent;
	}
	pthread_mutex_unlock(&tr->lock);
	return s;
}

static inline void mh_span_attr(struct mh_tracer *tr, struct smux_span *s,
				const char *attr, const char *str, int64_t num,
				bool is_int)
{
	if (!s)
		return;
	pthread_mutex_lock(&tr->lock);
	if (s->n_attrs < MH_SPAN_ATTRS) {
		unsigned i = s->n_attrs++;

		snprintf(s->attr[i], sizeof(s->attr[i]), "%s", attr);
		snprintf(s->str[i], sizeof(s->str[i]), "%s", str ? str : "");
		s->num[i] = num;
		s->is_int[i] = is_int;
	}
	pthread_mutex_unlock(&tr->lock);
}

static inline void mh_span_str(void *arg, struct smux_span *s, const char *attr,
			       const char *value)
{
	mh_span_attr(arg, s, attr, value, 0, false);
}

static inline void mh_span_int(void *arg, struct smux_span *s, const char *attr,
			       int64_t value)
{
	mh_span_attr(arg, s, attr, NULL, value, true);
}

static inline void mh_span_end(void *arg, struct smux_span *s)
{
	struct mh_tracer *tr = arg;

	if (!s)
		return;
	pthread_mutex_lock(&tr->lock);
	s->ended = true;
	pthread_mutex_unlock(&tr->lock);
}

static inline void mh_tracer_init(struct mh_tracer *tr)
{
	memset(tr, 0, sizeof(*tr));
	pthread_mutex_init(&tr->lock, NULL);
	tr->t.start = mh_span_start;
	tr->t.set_str = mh_span_str;
	tr->t.set_int = mh_span_int;
	tr->t.end = mh_span_end;
	tr->t.arg = tr;
}

/* The attribute @attr of @s, or NULL. */
static inline const char *mh_span_get(const struct smux_span *s,
				      const char *attr, int64_t *num)
{
	for (unsigned i = 0; i < s->n_attrs; i++) {
		if (strcmp(s->attr[i], attr) != 0)
			continue;
		if (num)
			*num = s->num[i];
		return s->str[i];
	}
	return NULL;
}

/* ---- temporary directories ---- */

static inline int mh_rm_entry(const char *path, const struct stat *st, int type,
			      struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

/* Removes @dir and everything under it (symlinks are not followed). */
static inline void mh_rm_rf(const char *dir)
{
	nftw(dir, mh_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

#endif /* SMUX_TESTS_MUX_HELPERS_H */
