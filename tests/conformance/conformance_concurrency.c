// SPDX-License-Identifier: MIT
/*
 * conformance_concurrency.c - operations from many threads at once.
 *
 * Same key: writers put whole objects whose every byte derives from a
 * version number written into the object's header (and whose size does
 * too), while readers get whole objects, plain or pinned to an etag from
 * head, and check each one is entirely one version: a torn read (bytes or
 * size of two versions) fails the test. Threads on their own keys check
 * they always read back exactly what they wrote.
 *
 * Different keys: threads create, read and delete keys in shared, new
 * directories (racing on creating them) while others list them.
 *
 * Threads never call cmocka (it is not thread-safe); they record failures
 * and the main thread asserts after joining.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "conformance/conformance.h"

#define CONC_THREADS 8
#define CONC_ITERS   300
#define CONC_HDR     16 /* version, then its complement */
/* Few sizes, so a same-size overwrite (a tempting in-place write) is
 * common, and objects big enough that such a write takes a while. */
#define CONC_SIZES 3
#define CONC_BASE  ((size_t)64 * 1024)
#define CONC_STEP  4099
#define CONC_MAX   (CONC_BASE + (size_t)(CONC_SIZES - 1) * CONC_STEP)

struct conc_shared {
	struct conf_env *env;
	pthread_barrier_t start;
	atomic_int busy; /* threads whose fixed work is not done yet */
	atomic_long reads, pinned_misses;
	atomic_long torn;	/* torn reads a CONF_F_RACY_GET server served */
	atomic_long raced_puts; /* CONF_F_RACY_PUT puts refused */
	atomic_int failures;
	pthread_mutex_t lock;
	char first[256]; /* protected by lock: the first failure */
};

struct conc_thread {
	struct conc_shared *sh;
	unsigned id;
	pthread_t tid;
};

static void conc_fail(struct conc_shared *sh, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void conc_fail(struct conc_shared *sh, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&sh->lock);
	if (atomic_fetch_add(&sh->failures, 1) == 0) {
		va_start(ap, fmt);
		(void)vsnprintf(sh->first, sizeof(sh->first), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&sh->lock);
}

static size_t conc_size(uint64_t v)
{
	return CONC_BASE + (size_t)(v % CONC_SIZES) * CONC_STEP;
}

static unsigned char conc_byte(uint64_t v)
{
	return (unsigned char)((v * UINT64_C(0x9E3779B97F4A7C15)) >> 56);
}

static void conc_put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t conc_get_u64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Lays version @v out in @buf (CONC_MAX bytes); returns its size. */
static size_t conc_make(unsigned char *buf, uint64_t v)
{
	size_t n = conc_size(v);

	conc_put_u64(buf, v);
	conc_put_u64(buf + 8, ~v);
	memset(buf + CONC_HDR, conc_byte(v), n - CONC_HDR);
	return n;
}

/* The version @buf holds entirely, or 0 when it mixes versions. */
static uint64_t conc_version(const unsigned char *buf, size_t len)
{
	uint64_t v;

	if (len < CONC_HDR)
		return 0;
	v = conc_get_u64(buf);
	if (conc_get_u64(buf + 8) != ~v || conc_size(v) != len)
		return 0;
	for (size_t i = CONC_HDR; i < len; i++)
		if (buf[i] != conc_byte(v))
			return 0;
	return v;
}

/*
 * A source over a prepared object that pauses halfway through, as a
 * network source might: a backend that lets readers see an object while
 * it is being written is caught with the pause inside its window.
 */
struct conc_slow_src {
	const unsigned char *buf;
	uint64_t len;
};

static long conc_slow_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	const struct conc_slow_src *s = arg;
	const struct timespec pause = {.tv_nsec = 1000000L};
	uint64_t half = s->len / 2;
	size_t first = 0;

	if (pos >= s->len)
		return 0;
	if (len > s->len - pos)
		len = (size_t)(s->len - pos);
	if (pos < half && pos + len > half) {
		first = (size_t)(half - pos);
		memcpy(dst, s->buf + pos, first);
		nanosleep(&pause, NULL);
	}
	memcpy((unsigned char *)dst + first, s->buf + pos + first, len - first);
	return (long)len;
}

static void conc_writer(struct conc_thread *t, unsigned char *buf)
{
	struct conf_env *env = t->sh->env;
	struct conc_slow_src slow = {.buf = buf};
	struct smux_source src;
	struct smux_error err;

	for (uint64_t i = 1; i <= CONC_ITERS; i++) {
		uint64_t v = (uint64_t)(t->id + 1) << 32 | i;

		slow.len = conc_make(buf, v);
		smux_source_cb(&src, conc_slow_read, &slow, slow.len);
		if (smux_backend_put(env->b, &env->ctx, "conc/shared", &src,
				     NULL, NULL, &err) == 0)
			continue;
		if (err.e.code == SMUX_E_BAD_RESPONSE &&
		    (env->fx->flags & CONF_F_RACY_PUT))
			atomic_fetch_add(&t->sh->raced_puts, 1);
		else
			conc_fail(t->sh, "writer %u: put: %s", t->id,
				  err.e.message);
	}
}

/* One read: plain, or pinned to the etag a head just returned. */
static void conc_read_once(struct conc_thread *t, bool pinned)
{
	struct conf_env *env = t->sh->env;
	struct smux_get_opts opts = {.length = SMUX_LEN_ALL};
	struct smux_info info;
	struct smux_error err;
	struct smux_sink sink;
	unsigned char *buf;
	size_t len;
	int rc;

	if (pinned) {
		if (smux_backend_head(env->b, &env->ctx, "conc/shared", &info,
				      &err)) {
			if (err.e.code == SMUX_E_KEY_NOT_FOUND &&
			    (env->fx->flags & CONF_F_RACY_GET))
				atomic_fetch_add(&t->sh->torn,
						 1); /* server's */
			else
				conc_fail(t->sh, "reader %u: head: %s", t->id,
					  err.e.message);
			return;
		}
		opts.if_match = info.etag;
	}
	smux_sink_dyn(&sink);
	rc = smux_backend_get(env->b, &env->ctx, "conc/shared", &opts, &sink,
			      NULL, &err);
	if (rc && pinned && err.e.code == SMUX_E_PRECONDITION_FAILED) {
		atomic_fetch_add(&t->sh->pinned_misses, 1); /* overwritten */
	} else if (rc && err.e.code == SMUX_E_KEY_NOT_FOUND &&
		   (env->fx->flags & CONF_F_RACY_GET)) {
		atomic_fetch_add(&t->sh->torn, 1); /* the server's race */
	} else if (rc) {
		conc_fail(t->sh, "reader %u: get: %s", t->id, err.e.message);
	} else {
		buf = smux_sink_dyn_take(&sink, &len);
		/* s3rver writes an object in place: a get racing a put
		 * may find it empty (no buffer) or half written */
		if ((!buf || conc_version(buf, len) == 0) &&
		    (env->fx->flags & CONF_F_RACY_GET))
			atomic_fetch_add(&t->sh->torn, 1); /* the server's */
		else if (!buf || conc_version(buf, len) == 0)
			conc_fail(t->sh,
				  "reader %u: torn read of %zu bytes "
				  "(header version %#" PRIx64 ")",
				  t->id, len, buf ? conc_get_u64(buf) : 0);
		free(buf);
		atomic_fetch_add(&t->sh->reads, 1);
	}
	smux_sink_release(&sink);
}

static void conc_reader(struct conc_thread *t)
{
	/* At least CONC_ITERS reads, and keep reading while writers write. */
	for (unsigned i = 0; i < CONC_ITERS || atomic_load(&t->sh->busy) > 0;
	     i++)
		conc_read_once(t, i % 2);
}

/* A thread alone on its key reads back exactly what it wrote. */
static void conc_own_key(struct conc_thread *t, unsigned char *buf)
{
	struct conf_env *env = t->sh->env;
	struct smux_error err;
	struct smux_info info;
	unsigned char *got;
	size_t len;
	char key[32];

	(void)snprintf(key, sizeof(key), "conc/own-%u", t->id);
	for (uint64_t i = 1; i <= CONC_ITERS; i++) {
		uint64_t v = (uint64_t)(t->id + 1) << 32 | i;
		size_t n = conc_make(buf, v);

		if (smux_backend_put_buf(env->b, &env->ctx, key, buf, n,
					 &err) ||
		    smux_backend_get_all(env->b, &env->ctx, key, &got, &len,
					 &err)) {
			conc_fail(t->sh, "%s: %s", key, err.e.message);
			continue;
		}
		if (conc_version(got, len) != v)
			conc_fail(t->sh,
				  "%s: read %zu bytes, not version %#" PRIx64,
				  key, len, v);
		free(got);
		if (i % 10 == 0 &&
		    (smux_backend_del(env->b, &env->ctx, key, &err) ||
		     smux_backend_head(env->b, &env->ctx, key, &info, &err) !=
			     -ENOENT))
			conc_fail(t->sh, "%s: delete then head: %s", key,
				  err.e.message);
	}
}

static void *conc_same_key_main(void *arg)
{
	struct conc_thread *t = arg;
	unsigned char *buf = malloc(CONC_MAX);

	pthread_barrier_wait(&t->sh->start);
	if (!buf) {
		conc_fail(t->sh, "thread %u: out of memory", t->id);
	} else if (t->id < 3) {
		conc_writer(t, buf);
	} else if (t->id < 6) {
		conc_reader(t);
	} else {
		conc_own_key(t, buf);
	}
	if (t->id < 3 || t->id >= 6)
		atomic_fetch_sub(&t->sh->busy, 1);
	free(buf);
	return NULL;
}

static void conc_run(struct conc_shared *sh, void *(*fn)(void *), int busy)
{
	struct conc_thread threads[CONC_THREADS];

	pthread_mutex_init(&sh->lock, NULL);
	assert_int_equal(pthread_barrier_init(&sh->start, NULL, CONC_THREADS),
			 0);
	atomic_init(&sh->busy, busy);
	for (unsigned i = 0; i < CONC_THREADS; i++) {
		threads[i].sh = sh;
		threads[i].id = i;
		assert_int_equal(
			pthread_create(&threads[i].tid, NULL, fn, &threads[i]),
			0);
	}
	for (unsigned i = 0; i < CONC_THREADS; i++)
		pthread_join(threads[i].tid, NULL);
	pthread_barrier_destroy(&sh->start);
	pthread_mutex_destroy(&sh->lock);
	if (atomic_load(&sh->torn))
		print_message("  *** %s served %ld torn reads racing puts "
			      "(CONF_F_RACY_GET: the server's race, counted, "
			      "not failed) ***\n",
			      sh->env->fx->name, atomic_load(&sh->torn));
	if (atomic_load(&sh->raced_puts))
		print_message("  *** %s refused %ld puts that raced another "
			      "(CONF_F_RACY_PUT: no version named, counted, "
			      "not failed) ***\n",
			      sh->env->fx->name, atomic_load(&sh->raced_puts));
	if (atomic_load(&sh->failures))
		print_error("%d failures; first: %s\n",
			    atomic_load(&sh->failures), sh->first);
	assert_int_equal(atomic_load(&sh->failures), 0);
}

void conf_test_concurrent_same_key(void **state)
{
	struct conc_shared sh = {.env = *state};
	unsigned char buf[CONC_MAX], *got;
	struct smux_error err;
	size_t len;

	/* The key exists before anyone reads it (version 0 means torn). */
	CONF_PUT(sh.env, "conc/shared", buf, conc_make(buf, 1), NULL);
	conc_run(&sh, conc_same_key_main, 5);
	print_message("  %ld whole-object reads, %ld pinned reads overtaken "
		      "by a put\n",
		      atomic_load(&sh.reads), atomic_load(&sh.pinned_misses));
	assert_true(atomic_load(&sh.reads) >= 3 * CONC_ITERS / 2);
	/* The last put of one of the writers won, whole. */
	CONF_OK(smux_backend_get_all(sh.env->b, &sh.env->ctx, "conc/shared",
				     &got, &len, &err),
		&err);
	assert_int_equal(conc_version(got, len) & 0xffffffffu, CONC_ITERS);
	free(got);
}

/* Keys of the different-keys test: thread @t, iteration @i. */
static void conc_key(char *buf, size_t size, unsigned t, unsigned i)
{
	(void)snprintf(buf, size, "ck/shared/sub%u/t%u-k%03u", i % 4, t, i);
}

static void *conc_keys_main(void *arg)
{
	struct conc_thread *t = arg;
	struct conf_env *env = t->sh->env;
	struct smux_error err;
	unsigned char *got;
	size_t len;
	char key[64];

	pthread_barrier_wait(&t->sh->start);
	if (t->id >= 6) {
		/* Listers: sorted, no duplicates, whatever changes meanwhile. */
		while (atomic_load(&t->sh->busy) > 0) {
			struct conf_list l = {0};

			if (conf_list_collect(env, "ck/", NULL, &l, &err))
				conc_fail(t->sh, "list: %s", err.e.message);
			for (size_t i = 1; i < l.n; i++)
				if (strcmp(l.keys[i - 1], l.keys[i]) >= 0)
					conc_fail(t->sh, "list order: %s, %s",
						  l.keys[i - 1], l.keys[i]);
			conf_list_free(&l);
		}
		return NULL;
	}
	for (unsigned i = 0; i < CONC_ITERS / 4; i++) {
		conc_key(key, sizeof(key), t->id, i);
		if (smux_backend_put_buf(env->b, &env->ctx, key, key,
					 strlen(key), &err) ||
		    smux_backend_get_all(env->b, &env->ctx, key, &got, &len,
					 &err)) {
			conc_fail(t->sh, "%s: %s", key, err.e.message);
			continue;
		}
		if (len != strlen(key) || memcmp(got, key, len) != 0)
			conc_fail(t->sh, "%s: wrong content", key);
		free(got);
		if (i % 5 == 4 &&
		    smux_backend_del(env->b, &env->ctx, key, &err))
			conc_fail(t->sh, "%s: delete: %s", key, err.e.message);
	}
	atomic_fetch_sub(&t->sh->busy, 1);
	return NULL;
}

void conf_test_concurrent_keys(void **state)
{
	struct conc_shared sh = {.env = *state};
	struct conf_list l = {0};
	struct smux_error err;
	size_t at = 0;
	char key[64];

	conc_run(&sh, conc_keys_main, 6);
	/* Exactly the keys not deleted, in order, each with its content. */
	CONF_OK(conf_list_collect(sh.env, "ck/", NULL, &l, &err), &err);
	for (unsigned sub = 0; sub < 4; sub++) {
		for (unsigned t = 0; t < 6; t++) {
			for (unsigned i = sub; i < CONC_ITERS / 4; i += 4) {
				if (i % 5 == 4)
					continue;
				conc_key(key, sizeof(key), t, i);
				assert_true(at < l.n);
				assert_string_equal(l.keys[at], key);
				assert_int_equal(l.info[at].size, strlen(key));
				at++;
			}
		}
	}
	assert_int_equal(at, l.n);
	conf_list_free(&l);
}
