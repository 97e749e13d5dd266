/* SPDX-License-Identifier: MIT */
/*
 * test_backend.c - the dispatch wrappers of smux/backend.h, driven through
 * an in-test fake backend whose operations table records every call: what
 * never reaches a backend (invalid keys, cancelled contexts, bad
 * arguments), how a failure becomes a complete error, the fallbacks of the
 * optional operations, reference counting, the convenience helpers and the
 * writer wrappers.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "smux/backend.h"
#include "smux/memory.h"
#include "smux/mux.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the fake backend ---- */

enum fake_op {
	OP_GET,
	OP_PUT,
	OP_DEL,
	OP_HEAD,
	OP_LIST,
	OP_COPY,
	OP_HEALTH,
	OP_STATFS,
	OP_WOPEN,
	OP_COUNT /* also "no op" for fail_op */
};

static const char *const op_names[OP_COUNT] = {
	[OP_GET] = "get",
	[OP_PUT] = "put",
	[OP_DEL] = "del",
	[OP_HEAD] = "head",
	[OP_LIST] = "list",
	[OP_COPY] = "copy",
	[OP_HEALTH] = "healthcheck",
	[OP_STATFS] = "statfs",
	[OP_WOPEN] = "writer_open",
};

#define FAKE_MAX_OBJS 8

struct fake_obj {
	char *key;
	unsigned char *data;
	size_t len;
	uint32_t mode;
};

/* What the fake writer's operations saw; lives in struct fake so it
 * survives the writer. */
struct fake_wcalls {
	unsigned pwrite, pread, truncate, size, commit, close;
	const void *last_buf;
	size_t last_len;
	uint64_t last_off, last_size;
	struct smux_put_opts last_opts;
	int fail_rc; /* the next pwrite/pread returns it, err left empty */
};

struct fake {
	struct smux_backend base;
	int *destroyed; /* incremented by destroy */

	unsigned calls[OP_COUNT];
	unsigned entries_delivered; /* list callbacks made */

	/* Failure injection: operation fail_op returns fail_rc, first
	 * filling err with fail_code (unless SMUX_OK), fail_backend and
	 * fail_attempts; fail_zero_errno then clears the errno. */
	enum fake_op fail_op;
	int fail_rc;
	enum smux_code fail_code;
	const char *fail_backend;
	unsigned fail_attempts;
	bool fail_zero_errno;

	bool no_info;	     /* get/head leave info untouched */
	bool writer_no_read; /* writers without pread */

	/* what the last calls received */
	char last_key[SMUX_KEY_MAX + 1];
	char last_dst[SMUX_KEY_MAX + 1];
	char last_prefix[SMUX_KEY_MAX + 1];
	const char *last_delim;
	struct smux_get_opts last_get;
	struct smux_put_opts last_put;
	bool last_info_null;
	unsigned last_wflags;
	struct fake_wcalls w;

	struct fake_obj objs[FAKE_MAX_OBJS];
};

static const struct smux_backend_ops fake_full_ops;
static const struct smux_backend_ops fake_min_ops;

/* The checked downcast (STYLE.md). */
static struct fake *fake_of(struct smux_backend *b)
{
	assert_true(b->ops == &fake_full_ops || b->ops == &fake_min_ops);
	return (struct fake *)b;
}

static void copy_key(char *dst, const char *src)
{
	snprintf(dst, SMUX_KEY_MAX + 1, "%s", src ? src : "(null)");
}

/* Counts the call, checks the wrapper's promises, injects a failure. */
static int fake_enter(struct fake *f, enum fake_op op, struct smux_error *err)
{
	f->calls[op]++;
	assert_non_null(err);
	assert_int_equal(err->e.code, SMUX_OK);
	if (f->fail_op != op)
		return 0;
	if (f->fail_code != SMUX_OK) {
		smux_error_set(err, f->fail_code, f->fail_backend,
			       "injected %s failure", op_names[op]);
		err->e.attempts = f->fail_attempts;
		if (f->fail_zero_errno)
			err->e.sys_errno = 0;
	}
	return f->fail_rc;
}

static struct fake_obj *fake_find(struct fake *f, const char *key)
{
	for (int i = 0; i < FAKE_MAX_OBJS; i++)
		if (f->objs[i].key && strcmp(f->objs[i].key, key) == 0)
			return &f->objs[i];
	return NULL;
}

static int fake_missing(const char *key, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, NULL, "no such key %s",
			      key);
}

static void fake_fill_info(struct fake *f, const struct fake_obj *o,
			   struct smux_info *info)
{
	if (!info || f->no_info)
		return;
	memset(info, 0, sizeof(*info));
	info->size = o->len;
	info->mode = o->mode;
	snprintf(info->etag, sizeof(info->etag), "v%zu", o->len);
}

static int fake_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	struct fake *f = fake_of(b);
	struct fake_obj *o;
	uint64_t off, len;
	int rc;

	(void)ctx;
	copy_key(f->last_key, key);
	assert_non_null(opts);
	f->last_get = *opts;
	f->last_info_null = info == NULL;
	rc = fake_enter(f, OP_GET, err);
	if (rc)
		return rc;
	o = fake_find(f, key);
	if (!o)
		return fake_missing(key, err);
	off = opts->offset < o->len ? opts->offset : o->len;
	len = o->len - off;
	if (opts->length < len)
		len = opts->length;
	rc = smux_sink_write(sink, o->data + off, (size_t)len);
	if (rc)
		return smux_error_from_errno(err, -rc, NULL, "sink");
	fake_fill_info(f, o, info);
	return 0;
}

static int fake_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	struct fake *f = fake_of(b);
	struct fake_obj *o;
	unsigned char *data;
	long n;
	int rc;

	(void)ctx;
	copy_key(f->last_key, key);
	assert_non_null(opts);
	assert_non_null(src);
	f->last_put = *opts;
	rc = fake_enter(f, OP_PUT, err);
	if (rc)
		return rc;
	data = malloc(src->length + 1);
	assert_non_null(data);
	n = src->length ? smux_source_read(src, 0, data, src->length) : 0;
	assert_int_equal(n, src->length);
	o = fake_find(f, key);
	for (int i = 0; !o && i < FAKE_MAX_OBJS; i++)
		if (!f->objs[i].key)
			o = &f->objs[i];
	assert_non_null(o);
	if (!o->key)
		o->key = strdup(key);
	free(o->data);
	o->data = data;
	o->len = src->length;
	o->mode = opts->mode ? opts->mode : 0644;
	fake_fill_info(f, o, info);
	return 0;
}

static int fake_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	struct fake *f = fake_of(b);
	struct fake_obj *o;
	int rc;

	(void)ctx;
	copy_key(f->last_key, key);
	rc = fake_enter(f, OP_DEL, err);
	if (rc)
		return rc;
	o = fake_find(f, key);
	if (o) {
		free(o->key);
		free(o->data);
		memset(o, 0, sizeof(*o));
	}
	return 0;
}

static int fake_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	struct fake *f = fake_of(b);
	struct fake_obj *o;
	int rc;

	(void)ctx;
	copy_key(f->last_key, key);
	f->last_info_null = info == NULL;
	rc = fake_enter(f, OP_HEAD, err);
	if (rc)
		return rc;
	o = fake_find(f, key);
	if (!o)
		return fake_missing(key, err);
	fake_fill_info(f, o, info);
	return 0;
}

/* Lists every stored key starting with @prefix (no folding, any order). */
static int fake_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	struct fake *f = fake_of(b);
	int rc;

	(void)ctx;
	assert_non_null(prefix);
	assert_non_null(fn);
	copy_key(f->last_prefix, prefix);
	f->last_delim = delimiter;
	rc = fake_enter(f, OP_LIST, err);
	if (rc)
		return rc;
	for (int i = 0; i < FAKE_MAX_OBJS; i++) {
		struct smux_list_entry e = {0};

		if (!f->objs[i].key ||
		    strncmp(f->objs[i].key, prefix, strlen(prefix)) != 0)
			continue;
		e.key = f->objs[i].key;
		e.info.size = f->objs[i].len;
		f->entries_delivered++;
		if (fn(arg, &e))
			break;
	}
	return 0;
}

static int fake_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *src, const char *dst, struct smux_error *err)
{
	struct fake *f = fake_of(b);

	(void)ctx;
	copy_key(f->last_key, src);
	copy_key(f->last_dst, dst);
	return fake_enter(f, OP_COPY, err);
}

static int fake_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			    struct smux_error *err)
{
	(void)ctx;
	return fake_enter(fake_of(b), OP_HEALTH, err);
}

static int fake_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
		       struct smux_statfs *out, struct smux_error *err)
{
	int rc;

	(void)ctx;
	rc = fake_enter(fake_of(b), OP_STATFS, err);
	if (rc)
		return rc;
	*out = (struct smux_statfs){.total_bytes = 1000,
				    .free_bytes = 400,
				    .total_files = 50,
				    .free_files = 20};
	return 0;
}

/* ---- the fake writer ---- */

struct fake_writer {
	struct smux_writer base;
	struct fake_wcalls *calls;
};

static struct fake_writer *fake_writer_of(struct smux_writer *w)
{
	assert_non_null(w);
	return (struct fake_writer *)w;
}

static int fw_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		     const void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct fake_wcalls *c = fake_writer_of(w)->calls;

	(void)ctx;
	assert_non_null(err);
	c->pwrite++;
	c->last_buf = buf;
	c->last_len = len;
	c->last_off = off;
	return c->fail_rc;
}

static long fw_pread(struct smux_writer *w, void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct fake_wcalls *c = fake_writer_of(w)->calls;

	assert_non_null(err);
	c->pread++;
	c->last_buf = buf;
	c->last_len = len;
	c->last_off = off;
	if (c->fail_rc)
		return c->fail_rc;
	memset(buf, 'r', len / 2);
	return (long)(len / 2);
}

static int fw_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
		       uint64_t size, struct smux_error *err)
{
	struct fake_wcalls *c = fake_writer_of(w)->calls;

	(void)ctx;
	assert_non_null(err);
	c->truncate++;
	c->last_size = size;
	return 0;
}

static uint64_t fw_size(struct smux_writer *w)
{
	struct fake_wcalls *c = fake_writer_of(w)->calls;

	c->size++;
	return 4242;
}

static int fw_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct fake_wcalls *c = fake_writer_of(w)->calls;

	(void)ctx;
	assert_non_null(err);
	assert_non_null(opts);
	c->commit++;
	c->last_opts = *opts;
	if (info)
		info->size = 4242;
	return 0;
}

static void fw_close(struct smux_writer *w)
{
	struct fake_writer *fw = fake_writer_of(w);

	fw->calls->close++;
	smux_writer_release(&fw->base);
	free(fw);
}

static const struct smux_writer_ops fake_writer_ops = {
	.pwrite = fw_pwrite,
	.pread = fw_pread,
	.truncate = fw_truncate,
	.size = fw_size,
	.commit = fw_commit,
	.close = fw_close,
};

static const struct smux_writer_ops fake_writer_noread_ops = {
	.pwrite = fw_pwrite,
	.truncate = fw_truncate,
	.size = fw_size,
	.commit = fw_commit,
	.close = fw_close,
};

static int fake_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, unsigned flags,
			    struct smux_writer **out, struct smux_error *err)
{
	struct fake *f = fake_of(b);
	struct fake_writer *w;
	int rc;

	(void)ctx;
	copy_key(f->last_key, key);
	f->last_wflags = flags;
	rc = fake_enter(f, OP_WOPEN, err);
	if (rc)
		return rc;
	w = calloc(1, sizeof(*w));
	assert_non_null(w);
	assert_int_equal(smux_writer_init(&w->base,
					  f->writer_no_read
						  ? &fake_writer_noread_ops
						  : &fake_writer_ops,
					  b, key),
			 0);
	w->calls = &f->w;
	*out = &w->base;
	return 0;
}

static void fake_destroy(struct smux_backend *b)
{
	struct fake *f = fake_of(b);

	(*f->destroyed)++;
	for (int i = 0; i < FAKE_MAX_OBJS; i++) {
		free(f->objs[i].key);
		free(f->objs[i].data);
	}
	smux_backend_release(&f->base);
	free(f);
}

/* An object store's limit. */
static size_t fake_key_max(struct smux_backend *b)
{
	(void)b;
	return 1024;
}

static const struct smux_backend_ops fake_full_ops = {
	.kind = "fake",
	.key_max = fake_key_max,
	.get = fake_get,
	.put = fake_put,
	.del = fake_del,
	.head = fake_head,
	.list = fake_list,
	.copy = fake_copy,
	.healthcheck = fake_healthcheck,
	.statfs = fake_statfs,
	.writer_open = fake_writer_open,
	.destroy = fake_destroy,
};

/* Only the required operations: every optional one takes its fallback. */
static const struct smux_backend_ops fake_min_ops = {
	.kind = "fakemin",
	.get = fake_get,
	.put = fake_put,
	.del = fake_del,
	.head = fake_head,
	.list = fake_list,
	.destroy = fake_destroy,
};

/* ---- fixtures ---- */

struct env {
	struct fake *f;
	struct smux_backend *b; /* our reference; NULL once dropped */
	int destroyed;
	struct smux_ctx ctx;
};

static int env_setup(void **state, const struct smux_backend_ops *ops)
{
	struct env *env = calloc(1, sizeof(*env));

	if (!env)
		return -1;
	env->f = calloc(1, sizeof(*env->f));
	if (!env->f || smux_backend_init(&env->f->base, ops, "fake-a") != 0) {
		free(env->f);
		free(env);
		return -1;
	}
	env->f->destroyed = &env->destroyed;
	env->f->fail_op = OP_COUNT;
	env->b = &env->f->base;
	smux_ctx_init(&env->ctx);
	*state = env;
	return 0;
}

static int setup_full(void **state)
{
	return env_setup(state, &fake_full_ops);
}

static int setup_min(void **state)
{
	return env_setup(state, &fake_min_ops);
}

/* Drops our reference; the backend must then be destroyed exactly once. */
static int teardown(void **state)
{
	struct env *env = *state;
	int ok;

	smux_backend_unref(env->b);
	ok = env->destroyed == 1;
	free(env);
	return ok ? 0 : -1;
}

static unsigned total_calls(const struct fake *f)
{
	unsigned n = 0;

	for (int i = 0; i < OP_COUNT; i++)
		n += f->calls[i];
	return n;
}

static int count_entry(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 0;
}

/* Calls wrapper @op with valid arguments under @ctx. */
static int call_op(struct env *env, enum fake_op op, const struct smux_ctx *ctx,
		   struct smux_error *err)
{
	struct smux_backend *b = env->b;
	struct smux_writer *w = NULL;
	struct smux_info info;
	struct smux_statfs st;
	struct smux_sink sink;
	unsigned n = 0;
	int rc;

	switch (op) {
	case OP_GET:
		smux_sink_dyn(&sink);
		rc = smux_backend_get(b, ctx, "k", NULL, &sink, &info, err);
		smux_sink_release(&sink);
		return rc;
	case OP_PUT:
		return smux_backend_put_buf(b, ctx, "k", "x", 1, err);
	case OP_DEL:
		return smux_backend_del(b, ctx, "k-del", err);
	case OP_HEAD:
		return smux_backend_head(b, ctx, "k", &info, err);
	case OP_LIST:
		return smux_backend_list(b, ctx, "", "/", count_entry, &n, err);
	case OP_COPY:
		return smux_backend_copy(b, ctx, "k", "k2", err);
	case OP_HEALTH:
		return smux_backend_healthcheck(b, ctx, err);
	case OP_STATFS:
		return smux_backend_statfs(b, ctx, &st, err);
	case OP_WOPEN:
		rc = smux_backend_writer_open(b, ctx, "k", 0, &w, err);
		smux_writer_close(w);
		return rc;
	case OP_COUNT:
		break;
	}
	fail();
	return 0;
}

static void put_obj(struct env *env, const char *key, const char *data)
{
	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, key, data,
					      strlen(data), NULL),
			 0);
}

/* Asserts a complete error of @code naming the fake. */
static void assert_error(const struct smux_error *err, int rc,
			 enum smux_code code)
{
	if (err->e.code != code)
		fail_msg("code %s, want %s", smux_code_name(err->e.code),
			 smux_code_name(code));
	assert_int_equal(rc, -err->e.sys_errno);
	assert_true(err->e.sys_errno > 0);
	assert_string_equal(err->e.backend, "fake-a");
	assert_true(err->e.message[0] != '\0');
}

/* ---- what never reaches the operations ---- */

static void test_invalid_keys_never_reach_ops(void **state)
{
	struct env *env = *state;
	/* NULL key: the 1025-byte one; bad_prefix: invalid as a prefix too */
	static const struct {
		const char *key;
		bool bad_prefix;
	} bad[] = {
		{"", false},	 {"/a", true},	  {"a//b", true},
		{"../x", true},	 {"a/./b", true}, {"a/..", false},
		{"a/../", true}, {NULL, true},
	};
	char *longkey = malloc(SMUX_KEY_MAX + 2);
	struct smux_writer *w;
	struct smux_sink sink;
	struct smux_error err;
	unsigned n = 0;

	assert_non_null(longkey);
	memset(longkey, 'k', SMUX_KEY_MAX + 1);
	for (int i = 100; i < SMUX_KEY_MAX; i += 101)
		longkey[i] = '/';
	longkey[SMUX_KEY_MAX + 1] = '\0';
	put_obj(env, "ok", "data");
	memset(env->f->calls, 0, sizeof(env->f->calls));

	smux_sink_dyn(&sink);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *k = bad[i].key ? bad[i].key : longkey;
		enum smux_code code =
			k == longkey ? SMUX_E_KEY_TOO_LONG : SMUX_E_INVALID_KEY;
		int rc;

		rc = smux_backend_get(env->b, &env->ctx, k, NULL, &sink, NULL,
				      &err);
		assert_error(&err, rc, code);
		rc = smux_backend_put_buf(env->b, &env->ctx, k, "", 0, &err);
		assert_error(&err, rc, code);
		rc = smux_backend_del(env->b, &env->ctx, k, &err);
		assert_error(&err, rc, code);
		rc = smux_backend_head(env->b, &env->ctx, k, NULL, &err);
		assert_error(&err, rc, code);
		rc = smux_backend_copy(env->b, &env->ctx, k, "ok2", &err);
		assert_error(&err, rc, code);
		rc = smux_backend_copy(env->b, &env->ctx, "ok", k, &err);
		assert_error(&err, rc, code);
		w = (struct smux_writer *)&n;
		rc = smux_backend_writer_open(env->b, &env->ctx, k, 0, &w,
					      &err);
		assert_error(&err, rc, code);
		assert_null(w);
		if (bad[i].bad_prefix) {
			rc = smux_backend_list(env->b, &env->ctx, k, "/",
					       count_entry, &n, &err);
			assert_error(&err, rc, code);
		}
		/* the same without an error to fill */
		assert_int_equal(smux_backend_del(env->b, &env->ctx, k, NULL),
				 rc);
	}

	/* a NULL key is refused too (a NULL prefix means the root) */
	assert_error(
		&err,
		smux_backend_get(env->b, NULL, NULL, NULL, &sink, NULL, &err),
		SMUX_E_INVALID_KEY);
	assert_error(&err, smux_backend_head(env->b, NULL, NULL, NULL, &err),
		     SMUX_E_INVALID_KEY);
	assert_error(&err, smux_backend_copy(env->b, NULL, "ok", NULL, &err),
		     SMUX_E_INVALID_KEY);

	/* directory markers cannot be copied or opened for writing */
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "d/", "x", &err),
			 -EINVAL);
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "ok", "d/", &err),
			 -EINVAL);
	assert_int_equal(
		smux_backend_writer_open(env->b, &env->ctx, "d/", 0, &w, &err),
		-EINVAL);
	assert_int_equal(smux_backend_list(env->b, &env->ctx, "a//", NULL,
					   count_entry, &n, &err),
			 -EINVAL);
	assert_int_equal(total_calls(env->f), 0);
	assert_int_equal(n, 0);

	/* but markers do reach get, put, del and head */
	assert_int_equal(
		smux_backend_put_buf(env->b, &env->ctx, "d/", "", 0, &err), 0);
	assert_int_equal(smux_backend_head(env->b, &env->ctx, "d/", NULL, &err),
			 0);
	assert_int_equal(smux_backend_get(env->b, &env->ctx, "d/", NULL, &sink,
					  NULL, &err),
			 0);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "d/", &err), 0);
	assert_int_equal(total_calls(env->f), 4);
	smux_sink_release(&sink);
	free(longkey);
}

static void test_cancelled_ctx_never_reaches_ops(void **state)
{
	struct env *env = *state;
	static const struct {
		enum smux_cancel_reason why; /* NONE: a passed deadline */
		int rc;
		enum smux_code code;
	} cases[] = {
		{SMUX_CANCEL_ABORT, -EINTR, SMUX_E_BACKEND_ABORTED},
		{SMUX_CANCEL_DRAIN, -EAGAIN, SMUX_E_BACKEND_DRAINING},
		{SMUX_CANCEL_NONE, -ETIMEDOUT, SMUX_E_BACKEND_TIMEOUT},
	};
	struct smux_writer *w;
	struct smux_error err;
	char buf[8];

	assert_int_equal(
		smux_backend_writer_open(env->b, &env->ctx, "k", 0, &w, NULL),
		0);
	memset(env->f->calls, 0, sizeof(env->f->calls));
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct smux_cancel token;
		struct smux_ctx ctx;

		smux_cancel_init(&token);
		assert_int_equal(smux_ctx_derive(&ctx, NULL, 0, &token), 0);
		if (cases[i].why != SMUX_CANCEL_NONE)
			smux_cancel_fire(&token, cases[i].why);
		else
			ctx.deadline_ns = smux_now_ns() - 1;
		for (int op = 0; op < OP_COUNT; op++) {
			int rc = call_op(env, (enum fake_op)op, &ctx, &err);

			assert_int_equal(rc, cases[i].rc);
			assert_error(&err, rc, cases[i].code);
			assert_int_equal(
				call_op(env, (enum fake_op)op, &ctx, NULL),
				cases[i].rc);
		}
		assert_int_equal(smux_writer_pwrite(w, &ctx, buf, 1, 0, &err),
				 cases[i].rc);
		assert_error(&err, cases[i].rc, cases[i].code);
		assert_int_equal(smux_writer_truncate(w, &ctx, 0, &err),
				 cases[i].rc);
		assert_int_equal(smux_writer_commit(w, &ctx, NULL, NULL, &err),
				 cases[i].rc);
		smux_cancel_release(&token);
	}
	assert_int_equal(total_calls(env->f), 0);
	assert_int_equal(
		env->f->w.pwrite + env->f->w.truncate + env->f->w.commit, 0);
	smux_writer_close(w);
}

static void test_bad_arguments_never_reach_ops(void **state)
{
	struct env *env = *state;
	struct smux_error err;
	struct smux_source src;
	struct smux_sink sink;
	unsigned n = 0;
	int rc;

	/* a directory marker holds no data */
	rc = smux_backend_put_buf(env->b, &env->ctx, "d/", "x", 1, &err);
	assert_int_equal(rc, -EINVAL);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);
	smux_source_buf(&src, "x", 1);
	rc = smux_backend_put(env->b, &env->ctx, "a/b/", &src, NULL, NULL,
			      &err);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);

	/* missing source, sink, callback */
	rc = smux_backend_put(env->b, &env->ctx, "k", NULL, NULL, NULL, &err);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);
	rc = smux_backend_get(env->b, &env->ctx, "k", NULL, NULL, NULL, &err);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);
	rc = smux_backend_list(env->b, &env->ctx, "", "/", NULL, NULL, &err);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);

	/* "/" is the only delimiter */
	rc = smux_backend_list(env->b, &env->ctx, "", ",", count_entry, &n,
			       &err);
	assert_int_equal(rc, -ENOTSUP);
	assert_error(&err, rc, SMUX_E_NOT_SUPPORTED);
	rc = smux_backend_list(env->b, &env->ctx, "a/", "//", count_entry, &n,
			       &err);
	assert_error(&err, rc, SMUX_E_NOT_SUPPORTED);
	assert_int_equal(total_calls(env->f), 0);

	/* ... and what does reach the op */
	smux_sink_dyn(&sink);
	smux_source_buf(&src, "", 0);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "d/", &src, NULL,
					  NULL, &err),
			 0);
	assert_int_equal(env->f->calls[OP_PUT], 1);
	smux_sink_release(&sink);
}

static void test_list_arguments_forwarded(void **state)
{
	struct env *env = *state;
	unsigned n = 0;

	put_obj(env, "a/1", "x");
	put_obj(env, "a/2", "y");
	put_obj(env, "b", "z");

	assert_int_equal(smux_backend_list(env->b, &env->ctx, "a/", "/",
					   count_entry, &n, NULL),
			 0);
	assert_string_equal(env->f->last_prefix, "a/");
	assert_string_equal(env->f->last_delim, "/");
	assert_int_equal(n, 2);

	/* "" as delimiter means none; NULL prefix means the root */
	assert_int_equal(smux_backend_list(env->b, &env->ctx, NULL, "",
					   count_entry, &n, NULL),
			 0);
	assert_string_equal(env->f->last_prefix, "");
	assert_null(env->f->last_delim);
	assert_int_equal(n, 5);
	assert_int_equal(smux_backend_list(env->b, NULL, "a", NULL, count_entry,
					   &n, NULL),
			 0);
	assert_null(env->f->last_delim);
	assert_int_equal(env->f->calls[OP_LIST], 3);
}

static void test_get_put_arguments_forwarded(void **state)
{
	struct env *env = *state;
	struct smux_get_opts gopts = {
		.offset = 2, .length = 3, .if_match = "v7"};
	struct smux_put_opts popts = {.mode = 0640, .mtime_ns = 12345};
	struct smux_source src;
	struct smux_sink sink;
	struct smux_info info;
	unsigned char *got;
	size_t len;

	/* NULL options: zeros for put, everything for get */
	put_obj(env, "k", "0123456");
	assert_int_equal(env->f->last_put.mode, 0);
	assert_int_equal(env->f->last_put.mtime_ns, 0);
	smux_sink_dyn(&sink);
	assert_int_equal(smux_backend_get(env->b, &env->ctx, "k", NULL, &sink,
					  NULL, NULL),
			 0);
	assert_int_equal(env->f->last_get.offset, 0);
	assert_int_equal(env->f->last_get.length, SMUX_LEN_ALL);
	assert_true(env->f->last_get.if_match == NULL ||
		    env->f->last_get.if_match[0] == '\0');
	assert_true(env->f->last_info_null);
	assert_int_equal(sink.written, 7);
	smux_sink_release(&sink);

	/* explicit options reach the op as given */
	smux_sink_dyn(&sink);
	assert_int_equal(smux_backend_get(env->b, &env->ctx, "k", &gopts, &sink,
					  &info, NULL),
			 0);
	assert_int_equal(env->f->last_get.offset, 2);
	assert_int_equal(env->f->last_get.length, 3);
	assert_string_equal(env->f->last_get.if_match, "v7");
	assert_false(env->f->last_info_null);
	assert_int_equal(info.size, 7);
	got = smux_sink_dyn_take(&sink, &len);
	assert_int_equal(len, 3);
	assert_string_equal((char *)got, "234");
	free(got);

	smux_source_buf(&src, "abc", 3);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "k2", &src, &popts,
					  &info, NULL),
			 0);
	assert_int_equal(env->f->last_put.mode, 0640);
	assert_int_equal(env->f->last_put.mtime_ns, 12345);
	assert_int_equal(info.size, 3);

	/* head gives the op somewhere to write even without @info */
	assert_int_equal(smux_backend_head(env->b, NULL, "k2", NULL, NULL), 0);
	assert_false(env->f->last_info_null);
	assert_int_equal(smux_backend_head(env->b, NULL, "k2", &info, NULL), 0);
	assert_int_equal(info.mode, 0640);
}

/* ---- failures become complete errors ---- */

/* An op that fails without saying why still yields a complete error. */
static void test_failure_without_err_completed(void **state)
{
	struct env *env = *state;
	static const struct {
		int rc;
		enum smux_code code;
	} cases[] = {
		{-ECONNRESET, SMUX_E_CONNECTION},
		{-ENOENT, SMUX_E_KEY_NOT_FOUND},
		{-ENOSPC, SMUX_E_NO_SPACE},
		{-EIO, SMUX_E_IO},
		/* the daemon's own descriptor limit: local, errno kept */
		{-EMFILE, SMUX_E_LOCAL_IO},
		{-ENFILE, SMUX_E_LOCAL_IO},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int op = 0; op < OP_COUNT; op++) {
			struct smux_error err;
			int rc;

			env->f->fail_op = (enum fake_op)op;
			env->f->fail_rc = cases[i].rc;
			memset(&err, 0x5a, sizeof(err));
			rc = call_op(env, (enum fake_op)op, &env->ctx, &err);
			if (rc != cases[i].rc)
				fail_msg("%s: rc %d, want %d", op_names[op], rc,
					 cases[i].rc);
			assert_error(&err, rc, cases[i].code);
			assert_int_equal(err.e.attempts, 1);
			assert_int_equal(err.e.http_status, 0);
			assert_false(err.has_cause);
			assert_int_equal(
				call_op(env, (enum fake_op)op, &env->ctx, NULL),
				cases[i].rc);
		}
	}
	for (int op = 0; op < OP_COUNT; op++)
		assert_int_equal(env->f->calls[op], 2 * ARRAY_SIZE(cases));
}

/* What an op reports is kept; only the missing parts are filled in. */
static void test_failure_with_err_kept_and_stamped(void **state)
{
	struct env *env = *state;

	for (int op = 0; op < OP_COUNT; op++) {
		struct smux_error err;
		int rc;

		/* no backend name, no attempts: the wrapper stamps them */
		env->f->fail_op = (enum fake_op)op;
		env->f->fail_rc = -ENOENT;
		env->f->fail_code = SMUX_E_KEY_NOT_FOUND;
		env->f->fail_backend = NULL;
		env->f->fail_attempts = 0;
		env->f->fail_zero_errno = false;
		rc = call_op(env, (enum fake_op)op, &env->ctx, &err);
		assert_int_equal(rc, -ENOENT);
		assert_error(&err, rc, SMUX_E_KEY_NOT_FOUND);
		assert_int_equal(err.e.attempts, 1);
		assert_true(strstr(err.e.message, "injected") != NULL);

		/* a nested backend's name and attempts are kept */
		env->f->fail_rc = -EIO;
		env->f->fail_code = SMUX_E_CONNECTION;
		env->f->fail_backend = "child";
		env->f->fail_attempts = 3;
		rc = call_op(env, (enum fake_op)op, &env->ctx, &err);
		assert_int_equal(rc, -EIO);
		assert_int_equal(err.e.code, SMUX_E_CONNECTION);
		assert_string_equal(err.e.backend, "child");
		assert_int_equal(err.e.attempts, 3);

		/* an error without an errno is still an error */
		env->f->fail_backend = NULL;
		env->f->fail_zero_errno = true;
		rc = call_op(env, (enum fake_op)op, &env->ctx, &err);
		assert_int_equal(rc, -EIO);
		assert_error(&err, rc, SMUX_E_CONNECTION);
	}
}

/* A successful call never returns a stale error from a previous one. */
static void test_success_clears_err(void **state)
{
	struct env *env = *state;

	put_obj(env, "k", "v");
	put_obj(env, "k2", "v");
	for (int op = 0; op < OP_COUNT; op++) {
		struct smux_error err;

		if (op == OP_WOPEN && env->b->ops == &fake_min_ops)
			continue; /* NOT_SUPPORTED, tested below */
		smux_error_set(&err, SMUX_E_ALL_BACKENDS_DOWN, "old", "stale");
		err.has_cause = true;
		assert_int_equal(
			call_op(env, (enum fake_op)op, &env->ctx, &err), 0);
		assert_int_equal(err.e.code, SMUX_OK);
		assert_false(err.has_cause);
	}
}

/* ---- fallbacks of the optional operations ---- */

static void test_optional_ops_used_when_present(void **state)
{
	struct env *env = *state;
	struct smux_statfs st;
	struct smux_writer *w;

	put_obj(env, "k", "v");
	memset(env->f->calls, 0, sizeof(env->f->calls));
	assert_int_equal(smux_backend_copy(env->b, NULL, "k", "k2", NULL), 0);
	assert_string_equal(env->f->last_key, "k");
	assert_string_equal(env->f->last_dst, "k2");
	assert_int_equal(smux_backend_healthcheck(env->b, NULL, NULL), 0);
	assert_int_equal(smux_backend_statfs(env->b, NULL, &st, NULL), 0);
	assert_int_equal(st.total_bytes, 1000);
	assert_int_equal(st.free_bytes, 400);
	assert_int_equal(st.total_files, 50);
	assert_int_equal(st.free_files, 20);
	assert_int_equal(smux_backend_writer_open(env->b, NULL, "k",
						  SMUX_WRITER_TRUNC, &w, NULL),
			 0);
	assert_int_equal(env->f->last_wflags, SMUX_WRITER_TRUNC);
	assert_string_equal(w->key, "k");
	assert_ptr_equal(w->backend, env->b);
	smux_writer_close(w);
	assert_int_equal(env->f->calls[OP_COPY], 1);
	assert_int_equal(env->f->calls[OP_HEALTH], 1);
	assert_int_equal(env->f->calls[OP_STATFS], 1);
	assert_int_equal(env->f->calls[OP_WOPEN], 1);
	assert_int_equal(env->f->calls[OP_GET] + env->f->calls[OP_PUT] +
				 env->f->calls[OP_LIST],
			 0);
}

/* Copy without ops->copy: get into a temporary file, put from it. */
static void test_copy_fallback_identical(void **state)
{
	struct env *env = *state;
	const size_t len = 3 * 1024 * 1024 + 17;
	unsigned char *data = malloc(len), *got;
	struct smux_put_opts popts = {.mode = 0640};
	struct smux_source src;
	struct smux_error err;
	size_t got_len;

	assert_non_null(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)(i * 31 + i / 4099);
	smux_source_buf(&src, data, len);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "src", &src,
					  &popts, NULL, NULL),
			 0);
	memset(env->f->calls, 0, sizeof(env->f->calls));

	assert_int_equal(
		smux_backend_copy(env->b, &env->ctx, "src", "d/dst", &err), 0);
	assert_int_equal(env->f->calls[OP_GET], 1);
	assert_int_equal(env->f->calls[OP_PUT], 1);
	assert_string_equal(env->f->last_key, "d/dst");
	assert_int_equal(env->f->last_put.mode, 0640); /* mode kept */

	assert_int_equal(smux_backend_get_all(env->b, &env->ctx, "d/dst", &got,
					      &got_len, NULL),
			 0);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, data, len);
	free(got);

	/* a get that reports no info: the copy keeps no stale mode */
	env->f->no_info = true;
	assert_int_equal(
		smux_backend_copy(env->b, &env->ctx, "src", "d/2", NULL), 0);
	assert_int_equal(env->f->last_put.mode, 0);
	free(data);
}

/* The temporary file honours $TMPDIR and leaves nothing behind. */
static void test_copy_fallback_tmpdir(void **state)
{
	struct env *env = *state;
	char dir[] = "/tmp/smux-test-backend-XXXXXX";
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL;
	struct dirent *de;
	unsigned char *got;
	size_t len;
	DIR *d;
	int entries = 0;

	assert_non_null(mkdtemp(dir));
	put_obj(env, "k", "contents");
	setenv("TMPDIR", dir, 1);
	assert_int_equal(smux_backend_copy(env->b, NULL, "k", "k2", NULL), 0);
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);

	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			entries++;
	closedir(d);
	assert_int_equal(entries, 0);
	assert_int_equal(rmdir(dir), 0);

	assert_int_equal(
		smux_backend_get_all(env->b, NULL, "k2", &got, &len, NULL), 0);
	assert_string_equal((char *)got, "contents");
	free(got);
}

static void test_copy_fallback_errors(void **state)
{
	struct env *env = *state;
	struct smux_error err;
	int rc;

	/* a missing source: the get's error, nothing put */
	rc = smux_backend_copy(env->b, &env->ctx, "nope", "dst", &err);
	assert_int_equal(rc, -ENOENT);
	assert_error(&err, rc, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(err.e.attempts, 1);
	assert_int_equal(env->f->calls[OP_PUT], 0);

	/* a failing put */
	put_obj(env, "k", "v");
	env->f->fail_op = OP_PUT;
	env->f->fail_rc = -ENOSPC;
	rc = smux_backend_copy(env->b, &env->ctx, "k", "dst", &err);
	assert_int_equal(rc, -ENOSPC);
	assert_error(&err, rc, SMUX_E_NO_SPACE);
	assert_int_equal(err.e.attempts, 1);
}

static int count_and_stop(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 1;
}

/* Healthcheck without ops->healthcheck: a listing of at most one key. */
static void test_healthcheck_fallback(void **state)
{
	struct env *env = *state;
	struct smux_error err;
	unsigned n = 0;
	int rc;

	/* an empty backend is healthy */
	assert_int_equal(smux_backend_healthcheck(env->b, &env->ctx, &err), 0);
	assert_int_equal(env->f->calls[OP_LIST], 1);
	assert_string_equal(env->f->last_prefix, "");
	assert_string_equal(env->f->last_delim, "/");

	/* it stops after the first entry */
	put_obj(env, "a", "1");
	put_obj(env, "b", "2");
	put_obj(env, "c", "3");
	env->f->entries_delivered = 0;
	assert_int_equal(smux_backend_healthcheck(env->b, &env->ctx, &err), 0);
	assert_int_equal(env->f->entries_delivered, 1);
	/* (a callback that stops a listing makes the listing succeed) */
	assert_int_equal(smux_backend_list(env->b, &env->ctx, "", NULL,
					   count_and_stop, &n, NULL),
			 0);
	assert_int_equal(n, 1);

	/* a failing listing is a failing healthcheck */
	env->f->fail_op = OP_LIST;
	env->f->fail_rc = -ECONNREFUSED;
	rc = smux_backend_healthcheck(env->b, &env->ctx, &err);
	assert_int_equal(rc, -ECONNREFUSED);
	assert_error(&err, rc, SMUX_E_CONNECTION);
	assert_int_equal(err.e.attempts, 1);
}

static void test_statfs_fallback(void **state)
{
	struct env *env = *state;
	struct smux_statfs st;
	struct smux_error err;

	memset(&st, 0xff, sizeof(st));
	assert_int_equal(smux_backend_statfs(env->b, &env->ctx, &st, &err), 0);
	assert_int_equal(st.total_bytes, 0);
	assert_int_equal(st.free_bytes, 0);
	assert_int_equal(st.total_files, 0);
	assert_int_equal(st.free_files, 0);
	assert_int_equal(err.e.code, SMUX_OK);
	assert_int_equal(total_calls(env->f), 0);
}

static void test_writer_open_fallback(void **state)
{
	struct env *env = *state;
	struct smux_writer *w = (struct smux_writer *)state;
	struct smux_error err;
	int rc;

	rc = smux_backend_writer_open(env->b, &env->ctx, "k", 0, &w, &err);
	assert_int_equal(rc, -ENOTSUP);
	assert_error(&err, rc, SMUX_E_NOT_SUPPORTED);
	assert_true(strstr(err.e.message, "fakemin") != NULL);
	assert_null(w);
	w = (struct smux_writer *)state;
	assert_int_equal(
		smux_backend_writer_open(env->b, &env->ctx, "k", 0, &w, NULL),
		-ENOTSUP);
	assert_null(w);
}

/* ---- reference counting ---- */

static void test_refcount_destroy_once(void **state)
{
	struct env *env = *state;

	assert_int_equal(atomic_load(&env->b->refs), 1);
	assert_ptr_equal(smux_backend_ref(env->b), env->b);
	assert_ptr_equal(smux_backend_ref(env->b), env->b);
	smux_backend_unref(env->b);
	smux_backend_unref(env->b);
	assert_int_equal(env->destroyed, 0);
	assert_int_equal(atomic_load(&env->b->refs), 1);
	smux_backend_unref(NULL);
	/* the last reference goes in teardown, which checks "once" */
}

#define REF_THREADS 4
#define REF_ROUNDS  20000

static void *ref_churn(void *arg)
{
	struct smux_backend *b = arg;

	for (int i = 0; i < REF_ROUNDS; i++) {
		smux_backend_ref(b);
		smux_backend_unref(b);
	}
	return NULL;
}

static void test_refcount_concurrent(void **state)
{
	struct env *env = *state;
	pthread_t t[REF_THREADS];

	for (int i = 0; i < REF_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, ref_churn, env->b),
				 0);
	for (int i = 0; i < REF_THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(env->destroyed, 0);
	assert_int_equal(atomic_load(&env->b->refs), 1);
}

/* A writer keeps its backend alive after the caller's last reference. */
static void test_writer_holds_reference(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;

	assert_int_equal(
		smux_backend_writer_open(env->b, NULL, "k", 0, &w, NULL), 0);
	assert_int_equal(atomic_load(&env->b->refs), 2);
	smux_backend_unref(env->b);
	env->b = NULL;
	assert_int_equal(env->destroyed, 0);
	assert_int_equal(smux_writer_size(w), 4242);
	smux_writer_close(w);
	assert_int_equal(env->destroyed, 1);
}

/* ---- helpers ---- */

static void test_put_buf_get_all(void **state)
{
	struct env *env = *state;
	const size_t big = 2 * 1024 * 1024 + 3;
	unsigned char *data = malloc(big), *got;
	struct smux_error err;
	size_t len;
	int rc;

	assert_int_equal(
		smux_backend_put_buf(env->b, &env->ctx, "k", "hello", 5, &err),
		0);
	assert_int_equal(env->f->last_put.mode, 0);
	assert_int_equal(
		smux_backend_get_all(env->b, &env->ctx, "k", &got, &len, &err),
		0);
	assert_int_equal(len, 5);
	assert_string_equal((char *)got, "hello");
	free(got);

	/* an empty object is a valid empty string, not NULL */
	assert_int_equal(smux_backend_put_buf(env->b, NULL, "e", "", 0, NULL),
			 0);
	assert_int_equal(
		smux_backend_get_all(env->b, NULL, "e", &got, &len, NULL), 0);
	assert_non_null(got);
	assert_int_equal(len, 0);
	assert_string_equal((char *)got, "");
	free(got);

	/* a missing object: the error, nothing handed out */
	got = (unsigned char *)state;
	len = 99;
	rc = smux_backend_get_all(env->b, &env->ctx, "nope", &got, &len, &err);
	assert_int_equal(rc, -ENOENT);
	assert_error(&err, rc, SMUX_E_KEY_NOT_FOUND);
	assert_null(got);
	assert_int_equal(len, 0);

	/* bigger than one I/O chunk, byte-exact */
	assert_non_null(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)(i ^ (i >> 9));
	assert_int_equal(
		smux_backend_put_buf(env->b, NULL, "big", data, big, NULL), 0);
	assert_int_equal(
		smux_backend_get_all(env->b, NULL, "big", &got, &len, NULL), 0);
	assert_int_equal(len, big);
	assert_memory_equal(got, data, big);
	assert_int_equal(got[big], '\0');
	free(got);
	free(data);

	/* the helpers validate like the wrappers */
	rc = smux_backend_put_buf(env->b, NULL, "/abs", "x", 1, &err);
	assert_error(&err, rc, SMUX_E_INVALID_KEY);
	rc = smux_backend_get_all(env->b, NULL, "a//b", &got, &len, &err);
	assert_error(&err, rc, SMUX_E_INVALID_KEY);
	assert_null(got);
}

/* ---- writers ---- */

static void test_writer_wrappers_forward(void **state)
{
	struct env *env = *state;
	struct smux_put_opts popts = {.mode = 0600, .mtime_ns = 99};
	struct fake_wcalls *c = &env->f->w;
	struct smux_writer *w;
	struct smux_info info;
	struct smux_error err;
	char buf[16];

	assert_int_equal(
		smux_backend_writer_open(env->b, &env->ctx, "a/k", 0, &w, &err),
		0);
	assert_string_equal(env->f->last_key, "a/k");
	assert_int_equal(env->f->last_wflags, 0);

	assert_int_equal(smux_writer_pwrite(w, &env->ctx, "abc", 3, 77, &err),
			 0);
	assert_int_equal(c->pwrite, 1);
	assert_int_equal(c->last_len, 3);
	assert_int_equal(c->last_off, 77);
	assert_memory_equal(c->last_buf, "abc", 3);

	assert_int_equal(smux_writer_pread(w, buf, 10, 5, &err), 5);
	assert_int_equal(c->pread, 1);
	assert_ptr_equal(c->last_buf, buf);
	assert_int_equal(c->last_len, 10);
	assert_int_equal(c->last_off, 5);
	assert_memory_equal(buf, "rrrrr", 5);

	assert_int_equal(smux_writer_truncate(w, &env->ctx, 1234, &err), 0);
	assert_int_equal(c->truncate, 1);
	assert_int_equal(c->last_size, 1234);

	assert_int_equal(smux_writer_size(w), 4242);
	assert_int_equal(c->size, 1);

	assert_int_equal(smux_writer_commit(w, &env->ctx, &popts, &info, &err),
			 0);
	assert_int_equal(c->commit, 1);
	assert_int_equal(c->last_opts.mode, 0600);
	assert_int_equal(c->last_opts.mtime_ns, 99);
	assert_int_equal(info.size, 4242);
	assert_int_equal(smux_writer_commit(w, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(c->commit, 2);
	assert_int_equal(c->last_opts.mode, 0);
	assert_int_equal(c->last_opts.mtime_ns, 0);

	/* the writer's ops run with the same err guarantee when NULL */
	assert_int_equal(smux_writer_pwrite(w, NULL, "x", 1, 0, NULL), 0);
	assert_int_equal(smux_writer_truncate(w, NULL, 0, NULL), 0);
	assert_int_equal(smux_writer_pread(w, buf, 2, 0, NULL), 1);

	smux_writer_close(w);
	assert_int_equal(c->close, 1);
	smux_writer_close(NULL);
}

static void test_writer_errors(void **state)
{
	struct env *env = *state;
	struct fake_wcalls *c = &env->f->w;
	struct smux_writer *w;
	struct smux_error err;
	char buf[4];
	long n;
	int rc;

	assert_int_equal(
		smux_backend_writer_open(env->b, NULL, "k", 0, &w, NULL), 0);

	/* an offset that wraps never reaches the writer */
	rc = smux_writer_pwrite(w, NULL, "ab", 2, UINT64_MAX - 1, &err);
	assert_int_equal(rc, -EINVAL);
	assert_error(&err, rc, SMUX_E_INVALID_ARGUMENT);
	assert_int_equal(c->pwrite, 0);

	/* an op failing without an error gets a complete one */
	c->fail_rc = -EDQUOT;
	rc = smux_writer_pwrite(w, NULL, "ab", 2, 0, &err);
	assert_int_equal(rc, -EDQUOT);
	assert_error(&err, rc, SMUX_E_NO_SPACE);
	assert_int_equal(err.e.attempts, 1);
	c->fail_rc = -EIO;
	n = smux_writer_pread(w, buf, sizeof(buf), 0, &err);
	assert_int_equal(n, -EIO);
	assert_error(&err, (int)n, SMUX_E_IO);
	c->fail_rc = 0;
	smux_writer_close(w);

	/* a writer that cannot be read back */
	env->f->writer_no_read = true;
	assert_int_equal(
		smux_backend_writer_open(env->b, NULL, "k", 0, &w, NULL), 0);
	n = smux_writer_pread(w, buf, sizeof(buf), 0, &err);
	assert_int_equal(n, -ENOTSUP);
	assert_error(&err, (int)n, SMUX_E_NOT_SUPPORTED);
	assert_int_equal(smux_writer_pread(w, buf, sizeof(buf), 0, NULL),
			 -ENOTSUP);
	assert_int_equal(c->pread, 1); /* the earlier failing one only */
	smux_writer_close(w);
	assert_int_equal(c->close, 2);
}

#define T_FULL(t) cmocka_unit_test_setup_teardown(t, setup_full, teardown)
#define T_MIN(t)  cmocka_unit_test_setup_teardown(t, setup_min, teardown)

/* setattr without ops->setattr rewrites the object: mode 0000 is meant
 * (SMUX_PUT_MODE), an owner goes with SMUX_PUT_OWNER (SMUX_ID_NONE keeps
 * that id), a marker too. */
static void test_setattr_fallback_owner_mode0(void **state)
{
	struct env *env = *state;
	struct smux_setattr a = {.flags = SMUX_SET_MODE | SMUX_SET_OWNER,
				 .mode = 0,
				 .uid = 5,
				 .gid = SMUX_ID_NONE};
	struct smux_error err;

	assert_int_equal(
		smux_backend_put_buf(env->b, &env->ctx, "x", "abc", 3, &err),
		0);
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "x", &a, &err),
			 0);
	assert_true(env->f->last_put.flags & SMUX_PUT_MODE);
	assert_int_equal(env->f->last_put.mode, 0);
	assert_true(env->f->last_put.flags & SMUX_PUT_OWNER);
	assert_int_equal(env->f->last_put.uid, 5);
	assert_int_equal(env->f->last_put.gid, SMUX_ID_NONE);
	assert_string_equal(env->f->last_key, "x");
	assert_int_equal(
		smux_backend_put_buf(env->b, &env->ctx, "d/", "", 0, &err), 0);
	assert_int_equal(
		smux_backend_setattr(env->b, &env->ctx, "d/", &a, &err), 0);
	assert_true(env->f->last_put.flags & SMUX_PUT_MODE);
	assert_true(env->f->last_put.flags & SMUX_PUT_OWNER);
	assert_int_equal(env->f->last_put.uid, 5);
	assert_string_equal(env->f->last_key, "d/");
}

/* The longest key: SMUX_KEY_MAX without ops->key_max, the backend's own
 * otherwise, and a mux takes what its most limited member takes. */
static void test_key_max(void **state)
{
	struct env *env = *state;
	struct smux_mux_opts mo = {.mode = SMUX_MODE_MIRROR};
	struct smux_mux_member m[2] = {{0}};
	struct smux_backend *mem, *mux;
	struct smux_error err;

	assert_int_equal(smux_backend_key_max(env->b),
			 env->b->ops->key_max ? 1024 : SMUX_KEY_MAX);
	assert_int_equal(smux_memory_new("mem", &mem, &err), 0);
	assert_int_equal(smux_backend_key_max(mem), SMUX_KEY_MAX);
	m[0].backend = mem;
	m[1].backend = env->b;
	assert_int_equal(smux_mux_new("mx", &mo, m, 2, &mux, &err), 0);
	assert_int_equal(smux_backend_key_max(mux),
			 env->b->ops->key_max ? 1024 : SMUX_KEY_MAX);
	smux_backend_unref(mux);
	assert_int_equal(smux_mux_new("mx", &mo, m, 1, &mux, &err), 0);
	assert_int_equal(smux_backend_key_max(mux), SMUX_KEY_MAX);
	smux_backend_unref(mux);
	smux_backend_unref(mem);
}

int main(void)
{
	const struct CMUnitTest dispatch[] = {
		T_FULL(test_invalid_keys_never_reach_ops),
		T_MIN(test_invalid_keys_never_reach_ops),
		T_FULL(test_key_max),
		T_MIN(test_key_max),
		T_MIN(test_setattr_fallback_owner_mode0),
		T_FULL(test_cancelled_ctx_never_reaches_ops),
		T_FULL(test_bad_arguments_never_reach_ops),
		T_FULL(test_list_arguments_forwarded),
		T_FULL(test_get_put_arguments_forwarded),
	};
	const struct CMUnitTest errors[] = {
		T_FULL(test_failure_without_err_completed),
		T_FULL(test_failure_with_err_kept_and_stamped),
		T_FULL(test_success_clears_err),
		T_MIN(test_success_clears_err),
	};
	const struct CMUnitTest fallbacks[] = {
		T_FULL(test_optional_ops_used_when_present),
		T_MIN(test_copy_fallback_identical),
		T_MIN(test_copy_fallback_tmpdir),
		T_MIN(test_copy_fallback_errors),
		T_MIN(test_healthcheck_fallback),
		T_MIN(test_statfs_fallback),
		T_MIN(test_writer_open_fallback),
	};
	const struct CMUnitTest refs[] = {
		T_FULL(test_refcount_destroy_once),
		T_FULL(test_refcount_concurrent),
		T_FULL(test_writer_holds_reference),
	};
	const struct CMUnitTest helpers[] = {
		T_MIN(test_put_buf_get_all),
	};
	const struct CMUnitTest writers[] = {
		T_FULL(test_writer_wrappers_forward),
		T_FULL(test_writer_errors),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("backend_dispatch", dispatch,
					      NULL, NULL);
	failed += cmocka_run_group_tests_name("backend_errors", errors, NULL,
					      NULL);
	failed += cmocka_run_group_tests_name("backend_fallbacks", fallbacks,
					      NULL, NULL);
	failed += cmocka_run_group_tests_name("backend_refs", refs, NULL, NULL);
	failed += cmocka_run_group_tests_name("backend_helpers", helpers, NULL,
					      NULL);
	failed += cmocka_run_group_tests_name("backend_writers", writers, NULL,
					      NULL);
	return failed ? 1 : 0;
}
