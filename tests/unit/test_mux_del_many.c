// SPDX-License-Identifier: MIT
/*
 * test_mux_del_many.c - a mux's del_many (SMUX_CAP_DEL_MANY: rm -r's
 * batches from the daemon's delete queue):
 *
 *  - a failover mux of one member (what a root that is one backend is
 *    wrapped in) hands the member the whole batch in ONE call, counted in
 *    the member's stats; a key the member fails fails alone;
 *  - a mux of several members deletes key by key in the mode's write
 *    pattern (a mirror: both replicas; one replica down: the key still
 *    goes, a hint replays it on the replica), in parallel;
 *  - the cap: a mux has it when every member has it.
 *
 * The members are memory backends whose operations table is copied with
 * a del_many and the cap added (a server's batch delete, counted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "mux_helpers.h"

/* A backend that forwards to a memory backend, plus del_many and
 * SMUX_CAP_DEL_MANY (a server's batch delete, counted). */
struct batchb {
	struct smux_backend base; /* first */
	struct smux_backend *inner;
};

static atomic_int batch_calls, batch_keys;
/* a key the batch delete refuses (NULL: none) */
static const char *batch_refuse;

static struct smux_backend *inner_of(struct smux_backend *b)
{
	return ((struct batchb *)b)->inner;
}

static int batch_get(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_get_opts *opts,
		     struct smux_sink *sink, struct smux_info *info,
		     struct smux_error *err)
{
	return smux_backend_get(inner_of(b), ctx, key, opts, sink, info, err);
}

static int batch_put(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_source *src,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	return smux_backend_put(inner_of(b), ctx, key, src, opts, info, err);
}

static int batch_del(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_error *err)
{
	return smux_backend_del(inner_of(b), ctx, key, err);
}

static int batch_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	return smux_backend_head(inner_of(b), ctx, key, info, err);
}

static int batch_list(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *prefix, const char *delimiter,
		      smux_list_fn fn, void *arg, struct smux_error *err)
{
	return smux_backend_list(inner_of(b), ctx, prefix, delimiter, fn, arg,
				 err);
}

static unsigned batch_caps(struct smux_backend *b)
{
	return smux_backend_caps(inner_of(b)) | SMUX_CAP_DEL_MANY;
}

static int batch_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *const *keys, size_t n, int *rcs,
			  struct smux_error *err)
{
	int first = 0;

	atomic_fetch_add(&batch_calls, 1);
	atomic_fetch_add(&batch_keys, (int)n);
	for (size_t i = 0; i < n; i++) {
		struct smux_error one;

		if (batch_refuse && strcmp(keys[i], batch_refuse) == 0)
			rcs[i] = smux_error_set(&one, SMUX_E_PERMISSION_DENIED,
						b->name, "refused %s", keys[i]);
		else
			rcs[i] = smux_backend_del(inner_of(b), ctx, keys[i],
						  &one);
		if (rcs[i] && !first) {
			first = rcs[i];
			*err = one;
		}
	}
	return first;
}

static void batch_destroy(struct smux_backend *b)
{
	smux_backend_unref(inner_of(b));
	smux_backend_release(b);
	free(b);
}

static const struct smux_backend_ops batch_ops = {
	.kind = "batch",
	.get = batch_get,
	.put = batch_put,
	.del = batch_del,
	.del_many = batch_del_many,
	.head = batch_head,
	.list = batch_list,
	.caps = batch_caps,
	.destroy = batch_destroy,
};

/* @inner_out (may be NULL) gets the memory backend behind it, borrowed. */
static struct smux_backend *batch_memory(const char *name,
					 struct smux_backend **inner_out)
{
	struct batchb *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	assert_int_equal(smux_backend_init(&b->base, &batch_ops, name), 0);
	b->inner = mh_memory(name);
	if (inner_out)
		*inner_out = b->inner;
	return &b->base;
}

static const char *const keys5[] = {"d/a", "d/b c", "d/x+y", "e/f", "d/g"};

static void put_all(struct smux_backend *b)
{
	for (size_t i = 0; i < 5; i++)
		MH_OK(mh_put(b, keys5[i], "v", NULL), NULL);
}

static void test_one_member_one_call(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *m0 = batch_memory("m0", NULL);
	struct smux_backend *mux = mh_mux("root", &o, &m0, NULL, 1);
	struct smux_mux_stats *st;
	struct smux_error err;
	struct smux_ctx ctx;
	int rcs[5];
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	assert_true(smux_backend_caps(mux) & SMUX_CAP_DEL_MANY);
	put_all(mux);
	atomic_store(&batch_calls, 0);
	atomic_store(&batch_keys, 0);
	MH_OK(smux_backend_del_many(mux, &ctx, keys5, 5, rcs, &err), &err);
	assert_int_equal(atomic_load(&batch_calls), 1);
	assert_int_equal(atomic_load(&batch_keys), 5);
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(rcs[i], 0);
		MH_LACKS(mux, keys5[i]);
	}
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_true(st->backends[0].hits >= 1);
	smux_mux_stats_free(st);

	/* one key refused: it fails alone, semantic (the member stays up) */
	put_all(mux);
	batch_refuse = "d/x+y";
	rc = smux_backend_del_many(mux, &ctx, keys5, 5, rcs, &err);
	batch_refuse = NULL;
	assert_int_equal(rc, -EACCES);
	assert_int_equal(rcs[2], -EACCES);
	for (size_t i = 0; i < 5; i++)
		if (i != 2) {
			assert_int_equal(rcs[i], 0);
			MH_LACKS(mux, keys5[i]);
		}
	MH_HOLDS(mux, "d/x+y", "v");
	st = smux_mux_stats(mux);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_UP);
	smux_mux_stats_free(st);
	smux_backend_unref(mux);
	smux_backend_unref(m0);
}

static void test_mirror_key_by_key(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR,
				  .cooldown_ms = 60000};
	struct smux_backend *inner[2];
	struct smux_backend *bb[2] = {batch_memory("r0", &inner[0]),
				      batch_memory("r1", &inner[1])};
	struct smux_backend *fb[2] = {mh_faulty("f0", bb[0], NULL),
				      mh_faulty("f1", bb[1], NULL)};
	struct smux_backend *mux = mh_mux("mirror", &o, fb, NULL, 2);
	struct smux_error err;
	struct smux_ctx ctx;
	int rcs[5];

	(void)state;
	smux_ctx_init(&ctx);
	put_all(mux);
	atomic_store(&batch_calls, 0);
	MH_OK(smux_backend_del_many(mux, &ctx, keys5, 5, rcs, &err), &err);
	assert_int_equal(atomic_load(&batch_calls), 0); /* key by key */
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(rcs[i], 0);
		MH_LACKS(inner[0], keys5[i]);
		MH_LACKS(inner[1], keys5[i]);
	}

	/* a replica down: every key still goes (the other replica takes it,
	 * a hint is left for the one that missed it) */
	put_all(mux);
	mh_fail(fb[1], true);
	MH_OK(smux_backend_del_many(mux, &ctx, keys5, 5, rcs, &err), &err);
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(rcs[i], 0);
		MH_LACKS(inner[0], keys5[i]);
		MH_HOLDS(inner[1], keys5[i], "v");
	}
	assert_true(smux_mux_pending_hints(mux) >= 5);
	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(fb[i]);
		smux_backend_unref(bb[i]);
	}
}

static void test_cap_needs_every_member(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *bs[2] = {batch_memory("b0", NULL),
				      mh_memory("plain")};
	struct smux_backend *mux = mh_mux("mixed", &o, bs, NULL, 2);

	(void)state;
	assert_false(smux_backend_caps(mux) & SMUX_CAP_DEL_MANY);
	smux_backend_unref(mux);
	smux_backend_unref(bs[0]);
	smux_backend_unref(bs[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_member_one_call),
		cmocka_unit_test(test_mirror_key_by_key),
		cmocka_unit_test(test_cap_needs_every_member),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
