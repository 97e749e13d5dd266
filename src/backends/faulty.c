/* SPDX-License-Identifier: MIT */
/*
 * faulty.c - the fault-injection backend of smux/faulty.h.
 *
 * Owns: the fault options of one instance, its deterministic random
 * stream, its hang bookkeeping and a writer that wraps the inner backend's
 * writer. Every operation (writer operations included) is counted; an
 * affected one inside the fault window sleeps the configured latency, then
 * one draw from the stream decides between a hang, a transient I/O error,
 * a semantic error, a connection timeout and no fault. Whatever survives
 * goes to the inner backend through the smux_backend_* / smux_writer_*
 * wrappers, so keys are validated and errors completed there. Never
 * touches the inner backend's state otherwise.
 *
 * Determinism: draw n (counted from creation or the last smux_faulty_set,
 * among affected calls inside the window) is splitmix64(seed + (n + 1) *
 * golden gamma), so a given sequence of calls meets the same faults on
 * every run, whatever the threads.
 *
 * The window is two instants on the monotonic clock fixed when the
 * options take effect; a latency or a hang never lasts past its end.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smux/faulty.h"

#define FAULTYB_POLL_NS (5 * 1000000LL) /* cancellation poll in a hang */
#define FAULTYB_GAMMA	0x9e3779b97f4a7c15ULL

struct faultyb {
	struct smux_backend base;     /* first: the generic part */
	struct smux_backend *inner;   /* own reference; immutable */
	pthread_mutex_t lock;	      /* protects the fields up to draws */
	pthread_cond_t hang_cond;     /* broadcast on release; with lock */
	struct smux_faulty_opts opts; /* protected by lock */
	uint64_t draws;		      /* draws since the last set; lock */
	int64_t win_start_ns;	      /* faults from here; lock */
	int64_t win_end_ns;	      /* up to here (0: no end); lock */
	bool released;		      /* hangs end at once; lock */
	uint64_t release_gen;	      /* bumped per release; lock */
	atomic_ulong calls;	      /* every call seen */
	atomic_uint hanging;	      /* calls inside a hang now */
};

enum faultyb_fault {
	FAULTYB_NONE,
	FAULTYB_HANG,
	FAULTYB_IO,
	FAULTYB_SEMANTIC,
	FAULTYB_TIMEOUT,
};

struct faultyb_writer {
	struct smux_writer base; /* first; holds a reference on the faulty */
	struct smux_writer *inner;
};

static const struct smux_backend_ops faultyb_ops;

/* Checked downcast; NULL when @b is not a faulty backend. */
static struct faultyb *faultyb_of(struct smux_backend *b)
{
	if (!b || b->ops != &faultyb_ops)
		return NULL;
	return (struct faultyb *)b;
}

static uint64_t faultyb_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1) from draw @n of the stream seeded by @seed. */
static double faultyb_uniform(uint64_t seed, uint64_t n)
{
	uint64_t x = faultyb_mix(seed + (n + 1) * FAULTYB_GAMMA);

	return (double)(x >> 11) * 0x1.0p-53;
}

static double faultyb_clamp_rate(double r)
{
	if (!(r > 0)) /* NaN too */
		return 0;
	return r < 1 ? r : 1;
}

/* Options as stored: rates in [0, 1], non-negative times, seed != 0. */
static void faultyb_normalise(struct smux_faulty_opts *o)
{
	o->hang_rate = faultyb_clamp_rate(o->hang_rate);
	o->error_rate = faultyb_clamp_rate(o->error_rate);
	o->semantic_rate = faultyb_clamp_rate(o->semantic_rate);
	o->timeout_rate = faultyb_clamp_rate(o->timeout_rate);
	if (o->latency_ms < 0)
		o->latency_ms = 0;
	if (o->hang_ms < 0)
		o->hang_ms = 0;
	if (o->after_ms < 0)
		o->after_ms = 0;
	if (o->for_ms < 0)
		o->for_ms = 0;
	if (o->stream_chunk_ms < 0)
		o->stream_chunk_ms = 0;
	if (o->seed == 0)
		o->seed = 1;
}

static bool faultyb_rate_ok(double r)
{
	return r >= 0 && r <= 1; /* false for NaN */
}

/* @ns + @ms milliseconds (both >= 0), saturated at INT64_MAX. */
static int64_t faultyb_add_ms(int64_t ns, int64_t ms)
{
	if (ms > (INT64_MAX - ns) / 1000000LL)
		return INT64_MAX;
	return ns + ms * 1000000LL;
}

/* Fixes the window of options that take effect now; with fb->lock. */
static void faultyb_window_start(struct faultyb *fb)
{
	int64_t now = smux_now_ns();

	fb->win_start_ns = faultyb_add_ms(now, fb->opts.after_ms);
	fb->win_end_ns = fb->opts.for_ms > 0 ? faultyb_add_ms(fb->win_start_ns,
							      fb->opts.for_ms)
					     : 0;
}

/*
 * Takes a snapshot of the options and, when @op is affected and the
 * window is open, one draw. Returns the fault the draw chose (FAULTYB_NONE
 * when not affected); *@win_end is the window's end (0: none).
 */
static enum faultyb_fault faultyb_pick(struct faultyb *fb,
				       enum smux_faulty_op op, const char *key,
				       struct smux_faulty_opts *o,
				       bool *affected, uint64_t *gen,
				       int64_t *win_end)
{
	int64_t now = smux_now_ns();
	double u, edge;
	unsigned mask;
	uint64_t n;

	atomic_fetch_add(&fb->calls, 1);
	pthread_mutex_lock(&fb->lock);
	*o = fb->opts;
	*gen = fb->release_gen;
	*win_end = fb->win_end_ns;
	mask = o->ops ? o->ops : ~0u;
	*affected = (mask & (1u << op)) != 0 && now >= fb->win_start_ns &&
		    (!fb->win_end_ns || now < fb->win_end_ns) &&
		    (!o->only_key[0] || (key && strcmp(key, o->only_key) == 0));
	n = *affected ? fb->draws++ : 0;
	pthread_mutex_unlock(&fb->lock);
	if (!*affected)
		return FAULTYB_NONE;

	u = faultyb_uniform(o->seed, n);
	edge = o->hang_rate;
	if (u < edge)
		return FAULTYB_HANG;
	edge += o->error_rate;
	if (u < edge)
		return FAULTYB_IO;
	edge += o->semantic_rate;
	if (u < edge)
		return FAULTYB_SEMANTIC;
	edge += o->timeout_rate;
	if (u < edge)
		return FAULTYB_TIMEOUT;
	return FAULTYB_NONE;
}

static void faultyb_abs_time(struct timespec *ts, int64_t mono_ns)
{
	ts->tv_sec = mono_ns / 1000000000LL;
	ts->tv_nsec = mono_ns % 1000000000LL;
}

/*
 * Hangs until released, hang_ms elapsed (when > 0), the window closed
 * (@win_end, when not 0) or, unless the options say the hang ignores it,
 * the context stops. Returns 0 when the call may go on, else the
 * context's error.
 */
static int faultyb_hang(struct faultyb *fb, const struct smux_ctx *ctx,
			const struct smux_faulty_opts *o, uint64_t gen,
			int64_t win_end, struct smux_error *err)
{
	int64_t end =
		o->hang_ms > 0 ? faultyb_add_ms(smux_now_ns(), o->hang_ms) : 0;
	bool cancelled = false;

	if (win_end && (!end || win_end < end))
		end = win_end;

	atomic_fetch_add(&fb->hanging, 1);
	pthread_mutex_lock(&fb->lock);
	while (!fb->released && fb->release_gen == gen) {
		int64_t now = smux_now_ns(), until = end;
		struct timespec ts;

		if (!o->hang_ignores_cancel &&
		    smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
			cancelled = true;
			break;
		}
		if (end && now >= end)
			break;
		if (!o->hang_ignores_cancel &&
		    (!until || until > now + FAULTYB_POLL_NS))
			until = now + FAULTYB_POLL_NS;
		if (!until) {
			pthread_cond_wait(&fb->hang_cond, &fb->lock);
			continue;
		}
		faultyb_abs_time(&ts, until);
		pthread_cond_timedwait(&fb->hang_cond, &fb->lock, &ts);
	}
	pthread_mutex_unlock(&fb->lock);
	atomic_fetch_sub(&fb->hanging, 1);
	if (cancelled)
		return smux_ctx_check(ctx, fb->base.name, err);
	return 0;
}

static int faultyb_apply(struct faultyb *fb, enum faultyb_fault fault,
			 const struct smux_ctx *ctx,
			 const struct smux_faulty_opts *o, uint64_t gen,
			 int64_t win_end, struct smux_error *err);

/* What a call drew: the fault and the options it was drawn under. */
struct faultyb_draw {
	enum faultyb_fault fault;
	struct smux_faulty_opts o;
	bool affected;
	uint64_t gen;
	int64_t win_end;
};

/*
 * The fault logic every operation runs first. Returns 0 when the call
 * should reach the inner backend, else a negative errno with @err filled.
 * With @d, a GET whose options defer its fault (get_fault_after) gets it
 * in @d instead of now.
 */
static int faultyb_enter_draw(struct faultyb *fb, enum smux_faulty_op op,
			      const char *key, const struct smux_ctx *ctx,
			      struct faultyb_draw *d, struct smux_error *err)
{
	struct smux_faulty_opts o;
	enum faultyb_fault fault;
	int64_t win_end, ns;
	bool affected;
	uint64_t gen;
	int rc;

	fault = faultyb_pick(fb, op, key, &o, &affected, &gen, &win_end);
	if (d) {
		d->fault = fault;
		d->o = o;
		d->affected = affected;
		d->gen = gen;
		d->win_end = win_end;
	}
	if (!affected)
		return 0;
	if (o.latency_ms > 0) {
		ns = faultyb_add_ms(0, o.latency_ms);
		if (win_end && win_end - smux_now_ns() < ns)
			ns = win_end - smux_now_ns();
		rc = ns > 0 ? smux_ctx_sleep(ctx, ns, fb->base.name, err) : 0;
		if (rc)
			return rc;
		if (win_end && smux_now_ns() >= win_end) {
			if (d)
				d->affected = false;
			return 0; /* the window closed meanwhile */
		}
	}
	if (d && op == SMUX_FAULTY_GET && o.get_fault_after > 0)
		return 0; /* strikes mid-stream (faultyb_get) */
	return faultyb_apply(fb, fault, ctx, &o, gen, win_end, err);
}

/* Makes @fault happen (the hang, or the error): 0 when the call may go
 * on, else a negative errno with @err filled. */
static int faultyb_apply(struct faultyb *fb, enum faultyb_fault fault,
			 const struct smux_ctx *ctx,
			 const struct smux_faulty_opts *o, uint64_t gen,
			 int64_t win_end, struct smux_error *err)
{
	switch (fault) {
	case FAULTYB_HANG:
		return faultyb_hang(fb, ctx, o, gen, win_end, err);
	case FAULTYB_IO:
		return smux_error_set(err, SMUX_E_IO, fb->base.name,
				      "injected I/O error");
	case FAULTYB_SEMANTIC:
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				      fb->base.name, "injected semantic fault");
	case FAULTYB_TIMEOUT:
		smux_error_set(err, SMUX_E_CONNECTION, fb->base.name,
			       "injected connection timeout");
		err->e.sys_errno = ETIMEDOUT;
		return -ETIMEDOUT;
	case FAULTYB_NONE:
		break;
	}
	return 0;
}

static int faultyb_enter(struct faultyb *fb, enum smux_faulty_op op,
			 const char *key, const struct smux_ctx *ctx,
			 struct smux_error *err)
{
	return faultyb_enter_draw(fb, op, key, ctx, NULL, err);
}

/*
 * faultyb_enter for a call that changes the inner backend: *@ctx becomes
 * @fresh (no deadline, no cancellation) after a hang that lands
 * (hang_lands), so the call reaches the inner backend whatever its
 * caller did meanwhile.
 */
static int faultyb_enter_change(struct faultyb *fb, enum smux_faulty_op op,
				const char *key, const struct smux_ctx **ctx,
				struct smux_ctx *fresh, struct smux_error *err)
{
	struct faultyb_draw d;
	int rc = faultyb_enter_draw(fb, op, key, *ctx, &d, err);

	if (rc == 0 && d.affected && d.fault == FAULTYB_HANG &&
	    d.o.hang_ignores_cancel && d.o.hang_lands) {
		smux_ctx_init(fresh);
		*ctx = fresh;
	}
	return rc;
}

/* Whether puts read their source before a possible hang (hang_lands). */
static bool faultyb_lands(struct faultyb *fb)
{
	bool yes;

	pthread_mutex_lock(&fb->lock);
	yes = fb->opts.hang_lands && fb->opts.hang_ignores_cancel &&
	      fb->opts.hang_rate > 0;
	pthread_mutex_unlock(&fb->lock);
	return yes;
}

/* ---- operations ---- */

/* A GET's sink as the faulty backend delivers it: in slow pieces, and/or
 * with its fault striking after get_fault_after bytes. */
struct faultyb_stream {
	struct faultyb *fb;
	struct smux_sink *real;
	const struct smux_ctx *ctx;
	struct faultyb_draw d;
	uint64_t delivered;
	bool struck;	       /* the deferred fault happened */
	int rc;		       /* its error (0: a hang that ended) */
	struct smux_error err; /* with rc */
};

static int faultyb_stream_piece(struct faultyb_stream *st, const char *p,
				size_t len)
{
	const struct smux_faulty_opts *o = &st->d.o;
	int rc;

	if (o->stream_chunk_ms > 0) {
		rc = smux_ctx_sleep(st->ctx, o->stream_chunk_ms * 1000000LL,
				    st->fb->base.name, &st->err);
		if (rc) {
			st->struck = true;
			st->rc = rc;
			return rc;
		}
	}
	if (!st->struck && st->d.fault != FAULTYB_NONE &&
	    o->get_fault_after > 0 &&
	    st->delivered + len >= o->get_fault_after) {
		size_t head = (size_t)(o->get_fault_after - st->delivered);

		rc = smux_sink_write(st->real, p, head);
		if (rc)
			return rc;
		st->delivered += head;
		p += head;
		len -= head;
		st->struck = true;
		st->rc = faultyb_apply(st->fb, st->d.fault, st->ctx, o,
				       st->d.gen, st->d.win_end, &st->err);
		if (st->rc)
			return st->rc;
	}
	rc = smux_sink_write(st->real, p, len);
	if (rc == 0)
		st->delivered += len;
	return rc;
}

static int faultyb_stream_write(void *arg, const void *data, size_t len)
{
	struct faultyb_stream *st = arg;
	uint64_t chunk = st->d.o.stream_chunk;
	const char *p = data;
	int rc = 0;

	while (len > 0 && rc == 0) {
		size_t n = (chunk > 0 && chunk < len) ? (size_t)chunk : len;

		rc = faultyb_stream_piece(st, p, n);
		p += n;
		len -= n;
	}
	return rc;
}

static int faultyb_stream_rewind(void *arg)
{
	struct faultyb_stream *st = arg;
	int rc = smux_sink_rewind(st->real);

	if (rc == 0)
		st->delivered = 0;
	return rc;
}

static int faultyb_get(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, const struct smux_get_opts *opts,
		       struct smux_sink *sink, struct smux_info *info,
		       struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct faultyb_stream st = {.fb = fb, .real = sink, .ctx = ctx};
	struct smux_sink wrap;
	int rc = faultyb_enter_draw(fb, SMUX_FAULTY_GET, key, ctx, &st.d, err);

	if (rc)
		return rc;
	if (!sink || !st.d.affected ||
	    (st.d.o.stream_chunk == 0 &&
	     (st.d.o.get_fault_after == 0 || st.d.fault == FAULTYB_NONE)))
		return smux_backend_get(fb->inner, ctx, key, opts, sink, info,
					err);
	smux_sink_cb(&wrap, faultyb_stream_write,
		     smux_sink_can_rewind(sink) ? faultyb_stream_rewind : NULL,
		     &st);
	wrap.written = sink->written;
	rc = smux_backend_get(fb->inner, ctx, key, opts, &wrap, info, err);
	if (st.struck && st.rc) {
		/* the injected fault, not the inner backend's view of a
		 * sink that refused */
		*err = st.err;
		return st.rc;
	}
	if (rc == 0 && st.d.fault != FAULTYB_NONE && !st.struck &&
	    st.d.o.get_fault_after > 0)
		/* shorter than get_fault_after: strikes at the end */
		return faultyb_apply(fb, st.d.fault, ctx, &st.d.o, st.d.gen,
				     st.d.win_end, err);
	return rc;
}

static unsigned faultyb_caps(struct smux_backend *b);

static int faultyb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, const struct smux_source *src,
		       const struct smux_put_opts *opts, struct smux_info *info,
		       struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	unsigned need = opts ? smux_caps_for_mode(opts->mode) : 0;
	struct smux_source own;
	struct smux_ctx fresh;
	void *buf = NULL;
	int rc;

	/* a type whose capability is hidden is refused, as a backend that
	 * keeps no such type refuses it */
	if (need && !(faultyb_caps(b) & need))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "put \"%s\": keeps no %s", key,
				      smux_caps_kept_name(need));
	if (faultyb_lands(fb) && src) {
		/* the request's body is on the wire before it hangs */
		uint64_t len = src->length;
		long got;

		buf = malloc(len ? (size_t)len : 1);
		if (!buf)
			return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					      NULL);
		got = len ? smux_source_read(src, 0, buf, (size_t)len) : 0;
		if (got < 0 || (uint64_t)got != len) {
			free(buf);
			return smux_error_from_errno(
				err, got < 0 ? (int)-got : EIO, b->name,
				"reading the source");
		}
		smux_source_buf(&own, buf, len);
		src = &own;
	}
	rc = faultyb_enter_change(fb, SMUX_FAULTY_PUT, key, &ctx, &fresh, err);
	if (rc == 0)
		rc = smux_backend_put(fb->inner, ctx, key, src, opts, info,
				      err);
	free(buf);
	return rc;
}

static int faultyb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_DEL, key, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_del(fb->inner, ctx, key, err);
}

static int faultyb_head(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, struct smux_info *info,
			struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_HEAD, key, ctx, err);

	if (rc)
		return rc;
	return smux_backend_head(fb->inner, ctx, key, info, err);
}

static int faultyb_list(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *prefix, const char *delimiter,
			smux_list_fn fn, void *arg, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_LIST, NULL, ctx, err);

	if (rc)
		return rc;
	return smux_backend_list(fb->inner, ctx, prefix, delimiter, fn, arg,
				 err);
}

static int faultyb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_COPY, src, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_copy(fb->inner, ctx, src, dst, err);
}

/* rename and setattr are faulted as copies (they write two keys' worth)
 * and forwarded so the inner backend's own semantics show through. */
static int faultyb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *src, const char *dst,
			  struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_COPY, src, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_rename(fb->inner, ctx, src, dst, err);
}

static int faultyb_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *a, const char *bname,
			    struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_COPY, a, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_exchange(fb->inner, ctx, a, bname, err);
}

static int faultyb_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, const struct smux_setattr *attr,
			   struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_PUT, key, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_setattr(fb->inner, ctx, key, attr, err);
}

static int faultyb_sync(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_PUT, key, ctx, err);

	if (rc)
		return rc;
	return smux_backend_sync(fb->inner, ctx, key, err);
}

static int faultyb_healthcheck(struct smux_backend *b,
			       const struct smux_ctx *ctx,
			       struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_HEALTHCHECK, NULL, ctx, err);

	if (rc)
		return rc;
	return smux_backend_healthcheck(fb->inner, ctx, err);
}

static int faultyb_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
			  struct smux_statfs *out, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_STATFS, NULL, ctx, err);

	if (rc)
		return rc;
	return smux_backend_statfs(fb->inner, ctx, out, err);
}

/* What the inner backend can, less what the options hide. */
static unsigned faultyb_caps(struct smux_backend *b)
{
	struct faultyb *fb = faultyb_of(b);
	unsigned off;

	pthread_mutex_lock(&fb->lock);
	off = fb->opts.caps_off;
	pthread_mutex_unlock(&fb->lock);
	/* a hang or a latency it injects must meet the bulkhead's deadline,
	 * never hold a caller's thread (SMUX_CAP_INLINE) */
	return smux_backend_caps(fb->inner) & ~off & ~(unsigned)SMUX_CAP_INLINE;
}

static bool faultyb_key_refused(struct smux_backend *b, const char *key)
{
	return smux_backend_key_refused(faultyb_of(b)->inner, key);
}

static size_t faultyb_key_max(struct smux_backend *b)
{
	return smux_backend_key_max(faultyb_of(b)->inner);
}

static int faultyb_link(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_COPY, src, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_link(fb->inner, ctx, src, dst, err);
}

/* Extended attributes: reads are faulted like get, writes like put. */
static int faultyb_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, const char *name, void *buf,
			    size_t size, size_t *out_len,
			    struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_GET, key, ctx, err);

	if (rc)
		return rc;
	return smux_backend_getxattr(fb->inner, ctx, key, name, buf, size,
				     out_len, err);
}

static int faultyb_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, const char *name,
			    const void *value, size_t size, int flags,
			    struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_PUT, key, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_setxattr(fb->inner, ctx, key, name, value, size,
				     flags, err);
}

static int faultyb_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, char *buf, size_t size,
			     size_t *out_len, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	int rc = faultyb_enter(fb, SMUX_FAULTY_GET, key, ctx, err);

	if (rc)
		return rc;
	return smux_backend_listxattr(fb->inner, ctx, key, buf, size, out_len,
				      err);
}

static int faultyb_removexattr(struct smux_backend *b,
			       const struct smux_ctx *ctx, const char *key,
			       const char *name, struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_ctx fresh;
	int rc = faultyb_enter_change(fb, SMUX_FAULTY_PUT, key, &ctx, &fresh,
				      err);

	if (rc)
		return rc;
	return smux_backend_removexattr(fb->inner, ctx, key, name, err);
}

/* ---- the writer ---- */

static const struct smux_writer_ops faultyb_writer_ops;

static struct faultyb_writer *faultyb_writer_of(struct smux_writer *w)
{
	if (!w || w->ops != &faultyb_writer_ops)
		return NULL;
	return (struct faultyb_writer *)w;
}

static int faultyb_wpwrite(struct smux_writer *w, const struct smux_ctx *ctx,
			   const void *buf, size_t len, uint64_t off,
			   struct smux_error *err)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);
	struct smux_ctx fresh;
	int rc =
		faultyb_enter_change(faultyb_of(w->backend), SMUX_FAULTY_WRITER,
				     NULL, &ctx, &fresh, err);

	if (rc)
		return rc;
	return smux_writer_pwrite(fw->inner, ctx, buf, len, off, err);
}

/* Reading back has no context: latency runs in full and a hang ends only
 * by release or hang_ms. */
static long faultyb_wpread(struct smux_writer *w, void *buf, size_t len,
			   uint64_t off, struct smux_error *err)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);
	int rc = faultyb_enter(faultyb_of(w->backend), SMUX_FAULTY_WRITER, NULL,
			       NULL, err);

	if (rc)
		return rc;
	return smux_writer_pread(fw->inner, buf, len, off, err);
}

static int faultyb_wtruncate(struct smux_writer *w, const struct smux_ctx *ctx,
			     uint64_t size, struct smux_error *err)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);
	struct smux_ctx fresh;
	int rc =
		faultyb_enter_change(faultyb_of(w->backend), SMUX_FAULTY_WRITER,
				     NULL, &ctx, &fresh, err);

	if (rc)
		return rc;
	return smux_writer_truncate(fw->inner, ctx, size, err);
}

static int faultyb_wfallocate(struct smux_writer *w, const struct smux_ctx *ctx,
			      int mode, uint64_t off, uint64_t len,
			      struct smux_error *err)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);
	struct smux_ctx fresh;
	int rc =
		faultyb_enter_change(faultyb_of(w->backend), SMUX_FAULTY_WRITER,
				     NULL, &ctx, &fresh, err);

	if (rc)
		return rc;
	return smux_writer_fallocate(fw->inner, ctx, mode, off, len, err);
}

/* Cannot fail, so no fault applies. */
static uint64_t faultyb_wsize(struct smux_writer *w)
{
	return smux_writer_size(faultyb_writer_of(w)->inner);
}

static int faultyb_wcommit(struct smux_writer *w, const struct smux_ctx *ctx,
			   const struct smux_put_opts *opts,
			   struct smux_info *info, struct smux_error *err)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);
	struct smux_ctx fresh;
	int rc =
		faultyb_enter_change(faultyb_of(w->backend), SMUX_FAULTY_WRITER,
				     NULL, &ctx, &fresh, err);

	if (rc)
		return rc;
	return smux_writer_commit(fw->inner, ctx, opts, info, err);
}

/* Cannot fail, so no fault applies: the inner writer always aborts. */
static void faultyb_wclose(struct smux_writer *w)
{
	struct faultyb_writer *fw = faultyb_writer_of(w);

	smux_writer_close(fw->inner);
	smux_writer_release(&fw->base);
	free(fw);
}

/* Cannot fail, so no fault applies. */
static void faultyb_wshared(struct smux_writer *w)
{
	smux_writer_shared(faultyb_writer_of(w)->inner);
}

static const struct smux_writer_ops faultyb_writer_ops = {
	.pwrite = faultyb_wpwrite,
	.pread = faultyb_wpread,
	.truncate = faultyb_wtruncate,
	.fallocate = faultyb_wfallocate,
	.size = faultyb_wsize,
	.commit = faultyb_wcommit,
	.close = faultyb_wclose,
	.shared = faultyb_wshared,
};

static int faultyb_writer_open(struct smux_backend *b,
			       const struct smux_ctx *ctx, const char *key,
			       unsigned flags, struct smux_writer **out,
			       struct smux_error *err)
{
	struct faultyb *fb = faultyb_of(b);
	struct faultyb_writer *fw;
	struct smux_writer *inner;
	int rc;

	rc = faultyb_enter(fb, SMUX_FAULTY_WRITER, key, ctx, err);
	if (rc)
		return rc;
	rc = smux_backend_writer_open(fb->inner, ctx, key, flags, &inner, err);
	if (rc)
		return rc;
	fw = calloc(1, sizeof(*fw));
	if (!fw)
		goto out_close_inner;
	if (smux_writer_init(&fw->base, &faultyb_writer_ops, b, key))
		goto out_free;
	fw->inner = inner;
	fw->base.found = inner->found;
	fw->base.has_dir_group = inner->has_dir_group;
	fw->base.dir_group = inner->dir_group;
	*out = &fw->base;
	return 0;

out_free:
	free(fw);
out_close_inner:
	smux_writer_close(inner);
	return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
}

static void faultyb_destroy(struct smux_backend *b)
{
	struct faultyb *fb = faultyb_of(b);

	smux_backend_unref(fb->inner);
	pthread_cond_destroy(&fb->hang_cond);
	pthread_mutex_destroy(&fb->lock);
	smux_backend_release(&fb->base);
	free(fb);
}

static const struct smux_backend_ops faultyb_ops = {
	.kind = "faulty",
	.get = faultyb_get,
	.put = faultyb_put,
	.del = faultyb_del,
	.head = faultyb_head,
	.list = faultyb_list,
	.copy = faultyb_copy,
	.rename = faultyb_rename,
	.exchange = faultyb_exchange,
	.setattr = faultyb_setattr,
	.sync = faultyb_sync,
	.healthcheck = faultyb_healthcheck,
	.statfs = faultyb_statfs,
	.writer_open = faultyb_writer_open,
	.caps = faultyb_caps,
	.key_max = faultyb_key_max,
	.key_refused = faultyb_key_refused,
	.link = faultyb_link,
	.getxattr = faultyb_getxattr,
	.setxattr = faultyb_setxattr,
	.listxattr = faultyb_listxattr,
	.removexattr = faultyb_removexattr,
	.destroy = faultyb_destroy,
};

/* ---- public ---- */

int smux_faulty_new(const char *name, struct smux_backend *inner,
		    const struct smux_faulty_opts *opts,
		    struct smux_backend **out, struct smux_error *err)
{
	struct smux_faulty_opts o = {0};
	pthread_condattr_t attr;
	struct faultyb *fb;

	*out = NULL;
	if (!inner)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "faulty backend without a backend to "
				      "wrap");
	if (!name)
		name = inner->name;
	if (opts)
		o = *opts;
	if (!faultyb_rate_ok(o.hang_rate) || !faultyb_rate_ok(o.error_rate) ||
	    !faultyb_rate_ok(o.semantic_rate) ||
	    !faultyb_rate_ok(o.timeout_rate) ||
	    o.hang_rate + o.error_rate + o.semantic_rate + o.timeout_rate >
		    1 + 1e-9)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "faulty backend %s: each rate must be "
				      "in [0, 1] and their sum at most 1",
				      name);
	if (o.latency_ms < 0 || o.hang_ms < 0 || o.after_ms < 0 || o.for_ms < 0)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "faulty backend %s: negative latency, "
				      "hang time or fault window",
				      name);
	faultyb_normalise(&o);

	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	if (smux_backend_init(&fb->base, &faultyb_ops, name)) {
		free(fb);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	fb->base.depth = inner->depth;
	fb->inner = smux_backend_ref(inner);
	fb->opts = o;
	faultyb_window_start(fb);
	atomic_init(&fb->calls, 0);
	atomic_init(&fb->hanging, 0);
	pthread_mutex_init(&fb->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&fb->hang_cond, &attr);
	pthread_condattr_destroy(&attr);
	*out = &fb->base;
	return 0;
}

void smux_faulty_set(struct smux_backend *b,
		     const struct smux_faulty_opts *opts)
{
	struct faultyb *fb = faultyb_of(b);
	struct smux_faulty_opts o = {0};

	if (!fb)
		return;
	if (opts)
		o = *opts;
	faultyb_normalise(&o);
	pthread_mutex_lock(&fb->lock);
	fb->opts = o;
	fb->draws = 0;
	faultyb_window_start(fb);
	fb->released = false;
	pthread_mutex_unlock(&fb->lock);
}

void smux_faulty_release_hangs(struct smux_backend *b)
{
	struct faultyb *fb = faultyb_of(b);

	if (!fb)
		return;
	pthread_mutex_lock(&fb->lock);
	fb->released = true;
	fb->release_gen++;
	pthread_cond_broadcast(&fb->hang_cond);
	pthread_mutex_unlock(&fb->lock);
}

unsigned smux_faulty_hanging(struct smux_backend *b)
{
	struct faultyb *fb = faultyb_of(b);

	return fb ? atomic_load(&fb->hanging) : 0;
}

unsigned long smux_faulty_calls(struct smux_backend *b)
{
	struct faultyb *fb = faultyb_of(b);

	return fb ? atomic_load(&fb->calls) : 0;
}
