/* SPDX-License-Identifier: MIT */
/*
 * ctx.c - cancel tokens and call contexts (smux/ctx.h).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "smux/ctx.h"

void smux_cancel_init(struct smux_cancel *c)
{
	pthread_condattr_t attr;

	atomic_init(&c->reason, SMUX_CANCEL_NONE);
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
}

void smux_cancel_release(struct smux_cancel *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

void smux_cancel_fire(struct smux_cancel *c, enum smux_cancel_reason why)
{
	int none = SMUX_CANCEL_NONE;

	if (why == SMUX_CANCEL_NONE)
		why = SMUX_CANCEL_ABORT;
	pthread_mutex_lock(&c->lock);
	atomic_compare_exchange_strong(&c->reason, &none, (int)why);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

enum smux_cancel_reason smux_cancel_reason(const struct smux_cancel *c)
{
	return (enum smux_cancel_reason)atomic_load(&c->reason);
}

void smux_ctx_init(struct smux_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
}

int64_t smux_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* now + @ns, saturated at INT64_MAX ("forever" must not wrap into the past). */
static int64_t deadline_after(int64_t ns)
{
	int64_t now = smux_now_ns();

	return ns > INT64_MAX - now ? INT64_MAX : now + ns;
}

int64_t smux_unique_wall_ns(void)
{
	static atomic_llong last;
	struct timespec ts;
	long long now, prev;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	prev = atomic_load(&last);
	do {
		if (now <= prev)
			now = prev + 1;
	} while (!atomic_compare_exchange_weak(&last, &prev, now));
	return now;
}

int smux_ctx_derive(struct smux_ctx *child, const struct smux_ctx *parent,
		    int64_t timeout_ns, struct smux_cancel *extra)
{
	if (parent)
		*child = *parent;
	else
		smux_ctx_init(child);
	if (timeout_ns > 0) {
		int64_t d = deadline_after(timeout_ns);

		if (child->deadline_ns == 0 || d < child->deadline_ns)
			child->deadline_ns = d;
	}
	if (extra) {
		for (unsigned i = 0; i < SMUX_CTX_MAX_CANCEL; i++) {
			if (child->cancel[i] == extra)
				return 0;
			if (!child->cancel[i]) {
				child->cancel[i] = extra;
				return 0;
			}
		}
		return -EOVERFLOW;
	}
	return 0;
}

enum smux_cancel_reason smux_ctx_state(const struct smux_ctx *ctx)
{
	if (!ctx)
		return SMUX_CANCEL_NONE;
	for (unsigned i = 0; i < SMUX_CTX_MAX_CANCEL && ctx->cancel[i]; i++) {
		enum smux_cancel_reason r = smux_cancel_reason(ctx->cancel[i]);

		if (r != SMUX_CANCEL_NONE)
			return r;
	}
	if (ctx->deadline_ns && smux_now_ns() >= ctx->deadline_ns)
		return SMUX_CANCEL_TIMEOUT;
	return SMUX_CANCEL_NONE;
}

/* The error a stopped call reports for @why. */
static int stop_error(enum smux_cancel_reason why, const char *backend,
		      struct smux_error *err)
{
	switch (why) {
	case SMUX_CANCEL_TIMEOUT:
		return smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, backend,
				      "deadline passed");
	case SMUX_CANCEL_DRAIN:
		return smux_error_set(err, SMUX_E_BACKEND_DRAINING, backend,
				      "cancelled: backend is draining");
	case SMUX_CANCEL_ABORT:
	default:
		return smux_error_set(err, SMUX_E_BACKEND_ABORTED, backend,
				      "cancelled by the caller");
	}
}

int smux_ctx_check(const struct smux_ctx *ctx, const char *backend,
		   struct smux_error *err)
{
	enum smux_cancel_reason why = smux_ctx_state(ctx);

	if (why == SMUX_CANCEL_NONE)
		return 0;
	return stop_error(why, backend, err);
}

int64_t smux_ctx_remaining_ns(const struct smux_ctx *ctx)
{
	int64_t left;

	if (!ctx || ctx->deadline_ns == 0)
		return INT64_MAX;
	left = ctx->deadline_ns - smux_now_ns();
	return left > 0 ? left : 0;
}

/* Waits on @c until it fires or the monotonic time @until_ns. */
static void wait_token(struct smux_cancel *c, int64_t until_ns)
{
	struct timespec ts = {
		.tv_sec = until_ns / 1000000000LL,
		.tv_nsec = until_ns % 1000000000LL,
	};

	pthread_mutex_lock(&c->lock);
	while (atomic_load(&c->reason) == SMUX_CANCEL_NONE) {
		if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) ==
		    ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&c->lock);
}

int smux_ctx_sleep(const struct smux_ctx *ctx, int64_t ns, const char *backend,
		   struct smux_error *err)
{
	/* With several tokens we can block on one only, so other tokens
	 * are noticed within this slice. */
	const int64_t slice = 5 * 1000000LL;
	int64_t end = deadline_after(ns > 0 ? ns : 0);
	int rc;

	for (;;) {
		int64_t now = smux_now_ns(), until = end;

		rc = smux_ctx_check(ctx, backend, err);
		if (rc)
			return rc;
		if (now >= end)
			return 0;
		if (ctx && ctx->deadline_ns && ctx->deadline_ns < until)
			until = ctx->deadline_ns;
		if (ctx && ctx->cancel[0]) {
			if (ctx->cancel[1] && until - now > slice)
				until = now + slice;
			wait_token(ctx->cancel[0], until);
		} else {
			struct timespec ts = {
				.tv_sec = (until - now) / 1000000000LL,
				.tv_nsec = (until - now) % 1000000000LL,
			};

			nanosleep(&ts, NULL);
		}
	}
}
