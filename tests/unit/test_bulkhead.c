/* SPDX-License-Identifier: MIT */
/*
 * test_bulkhead.c - the bulkhead (src/core/bulkhead.h): deadlines that hold
 * while a backend is blocked inside a system call, caller aborts, bounded
 * concurrency, races through a group, serialised writer operations, freeing
 * with stuck workers, idle retirement, and a threaded stress run for TSan.
 *
 * The fake backend goes through the ordinary ops table. Keys choose its
 * behaviour: "ok" answers at once; "block" blocks in read(2) on a pipe until
 * the test writes a byte to it, then tries to reach the caller's sink,
 * source or callback again (which must fail, the caller having gone);
 * "slow" writes, sleeps 3 ms and writes again.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/bulkhead.h"

/* ---- the fake backend ---- */

#define LATE_UNSET 12345

struct fake {
	struct smux_backend base;
	int pipe[2];		/* "block" reads pipe[0] */
	atomic_int calls;	/* operations that reached the backend */
	atomic_int running;	/* operations inside the backend now */
	atomic_int max_running; /* the most at once */
	atomic_int blocked;	/* operations inside read(2) now */
	atomic_int woke_reason; /* smux_ctx_state() after a block */
	atomic_int late_rc;	/* sink/source use after a block */
	atomic_int list_late;	/* callback proxy's answer after a block */
	atomic_int in_writer;	/* writer operations running now */
	atomic_int overlap;	/* writer operations that overlapped */
	atomic_int w_opened;	/* writers opened */
	atomic_int w_closed;	/* writers closed */
	unsigned caps;		/* what fake_caps answers */
	_Atomic unsigned long last_tid; /* pthread_self() of the last head
					   or pwrite */
	pthread_mutex_t lock;		/* protects last_put, last_pwrite */
	char last_put[64];		/* protected by lock */
	char last_pwrite[64];		/* protected by lock */
};

struct fake_writer {
	struct smux_writer base;
	struct fake *f;
	char data[64];
	uint64_t size;
};

static atomic_int fake_destroyed;

static struct fake *to_fake(struct smux_backend *b)
{
	return (struct fake *)b;
}

static void enter_op(struct fake *f)
{
	int now = atomic_fetch_add(&f->running, 1) + 1;
	int max = atomic_load(&f->max_running);

	atomic_fetch_add(&f->calls, 1);
	while (now > max &&
	       !atomic_compare_exchange_weak(&f->max_running, &max, now))
		;
}

static void leave_op(struct fake *f)
{
	atomic_fetch_sub(&f->running, 1);
}

/* Blocks inside read(2) until the test writes a byte to the pipe. */
static void block_in_read(struct fake *f, const struct smux_ctx *ctx)
{
	char c;
	ssize_t n;

	atomic_fetch_add(&f->blocked, 1);
	do {
		n = read(f->pipe[0], &c, 1);
	} while (n < 0 && errno == EINTR);
	atomic_fetch_sub(&f->blocked, 1);
	atomic_store(&f->woke_reason, (int)smux_ctx_state(ctx));
}

static void fill_info(struct smux_info *info, uint64_t size)
{
	if (!info)
		return;
	memset(info, 0, sizeof(*info));
	info->size = size;
	info->mode = 0100644;
	snprintf(info->etag, sizeof(info->etag), "v1");
}

static int fake_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	struct fake *f = to_fake(b);
	int rc = 0;

	enter_op(f);
	if (strcmp(key, "ok") == 0) {
		fill_info(info, 11);
		rc = smux_sink_write(sink, "hello world", 11);
	} else if (strcmp(key, "block") == 0) {
		int late;

		rc = smux_sink_write(sink, "early", 5);
		block_in_read(f, ctx);
		late = smux_sink_write(sink, "LATE", 4);
		atomic_store(&f->late_rc, late);
		if (rc == 0)
			rc = late;
	} else if (strcmp(key, "slow") == 0) {
		rc = smux_sink_write(sink, "ab", 2);
		usleep(3000);
		if (rc == 0)
			rc = smux_sink_write(sink, "cd", 2);
	} else {
		rc = smux_error_set(err, SMUX_E_KEY_NOT_FOUND, b->name,
				    "no such key: %s", key);
	}
	leave_op(f);
	return rc;
}

static int fake_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	struct fake *f = to_fake(b);
	char buf[64] = {0};
	long n;

	enter_op(f);
	if (strcmp(key, "block") == 0)
		block_in_read(f, ctx);
	n = smux_source_read(src, 0, buf, sizeof(buf) - 1);
	if (strcmp(key, "block") == 0)
		atomic_store(&f->late_rc, (int)n);
	if (n >= 0) {
		pthread_mutex_lock(&f->lock);
		memcpy(f->last_put, buf, sizeof(buf));
		pthread_mutex_unlock(&f->lock);
		fill_info(info, (uint64_t)n);
	}
	leave_op(f);
	return n < 0 ? (int)n : 0;
}

/*
 * Thread-local state with a destructor, as OpenSSL keeps per thread for
 * curl: a delete of "tls" sets it on the worker. The destructor runs when
 * the worker thread ends; it waits (bounded) for the test's go, so a free
 * that does not wait for its workers returns before it ran.
 */
static pthread_key_t tls_key;
static atomic_int tls_go;
static atomic_int tls_freed;

static void tls_destructor(void *value)
{
	int64_t until = smux_now_ns() + 300 * 1000000LL;

	while (!atomic_load(&tls_go) && smux_now_ns() < until)
		usleep(1000);
	free(value);
	atomic_fetch_add(&tls_freed, 1);
}

static int fake_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	if (strcmp(key, "tls") == 0 && !pthread_getspecific(tls_key))
		pthread_setspecific(tls_key, malloc(16));
	enter_op(to_fake(b));
	leave_op(to_fake(b));
	return 0;
}

static int fake_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	struct fake *f = to_fake(b);
	int rc = 0;

	enter_op(f);
	atomic_store(&f->last_tid, (unsigned long)pthread_self());
	if (strcmp(key, "block") == 0)
		block_in_read(f, ctx);
	if (strcmp(key, "ok") == 0 || strcmp(key, "block") == 0)
		fill_info(info, 11);
	else
		rc = smux_error_set(err, SMUX_E_KEY_NOT_FOUND, b->name,
				    "no such key: %s", key);
	leave_op(f);
	return rc;
}

static int fake_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	static const char *const keys[] = {"a", "b", "c"};
	struct fake *f = to_fake(b);
	struct smux_list_entry e;

	enter_op(f);
	memset(&e, 0, sizeof(e));
	for (unsigned i = 0; i < 3; i++) {
		int rc;

		if (i == 1 && strcmp(prefix, "block") == 0)
			block_in_read(f, ctx);
		e.key = keys[i];
		fill_info(&e.info, i);
		rc = fn(arg, &e);
		if (i == 1 && strcmp(prefix, "block") == 0)
			atomic_store(&f->list_late, rc);
		if (rc)
			break;
	}
	leave_op(f);
	return 0;
}

static int fake_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
		       struct smux_statfs *out, struct smux_error *err)
{
	out->total_bytes = 1000;
	out->free_bytes = 400;
	return 0;
}

/* Notes writer operations that overlap (they must be serialised). */
static void w_enter(struct fake *f)
{
	if (atomic_fetch_add(&f->in_writer, 1) != 0)
		atomic_fetch_add(&f->overlap, 1);
}

static void w_leave(struct fake *f)
{
	atomic_fetch_sub(&f->in_writer, 1);
}

static int fw_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		     const void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct fake_writer *fw = (struct fake_writer *)w;

	w_enter(fw->f);
	atomic_store(&fw->f->last_tid, (unsigned long)pthread_self());
	if (len >= 5 && memcmp(buf, "BLOCK", 5) == 0) {
		block_in_read(fw->f, ctx);
		usleep(20000); /* widen the window a concurrent close needs */
	}
	if (off + len > sizeof(fw->data) - 1) {
		w_leave(fw->f);
		return smux_error_set(err, SMUX_E_NO_SPACE, w->backend->name,
				      "fake writer is full");
	}
	memcpy(fw->data + off, buf, len);
	if (off + len > fw->size)
		fw->size = off + len;
	pthread_mutex_lock(&fw->f->lock);
	memset(fw->f->last_pwrite, 0, sizeof(fw->f->last_pwrite));
	memcpy(fw->f->last_pwrite, buf, len);
	pthread_mutex_unlock(&fw->f->lock);
	w_leave(fw->f);
	return 0;
}

static long fw_pread(struct smux_writer *w, void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct fake_writer *fw = (struct fake_writer *)w;
	size_t n = 0;

	w_enter(fw->f);
	if (off < fw->size) {
		n = (size_t)(fw->size - off);
		if (n > len)
			n = len;
		memcpy(buf, fw->data + off, n);
	}
	w_leave(fw->f);
	return (long)n;
}

static int fw_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
		       uint64_t size, struct smux_error *err)
{
	struct fake_writer *fw = (struct fake_writer *)w;

	w_enter(fw->f);
	if (size < fw->size)
		fw->size = size;
	w_leave(fw->f);
	return 0;
}

static uint64_t fw_size(struct smux_writer *w)
{
	return ((struct fake_writer *)w)->size;
}

static int fw_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct fake_writer *fw = (struct fake_writer *)w;

	w_enter(fw->f);
	fill_info(info, fw->size);
	w_leave(fw->f);
	return 0;
}

static void fw_close(struct smux_writer *w)
{
	struct fake_writer *fw = (struct fake_writer *)w;
	struct fake *f = fw->f;

	w_enter(f);
	smux_writer_release(w);
	free(fw);
	w_leave(f);
	atomic_fetch_add(&f->w_closed, 1);
}

static const struct smux_writer_ops fake_writer_ops = {
	.pwrite = fw_pwrite,
	.pread = fw_pread,
	.truncate = fw_truncate,
	.size = fw_size,
	.commit = fw_commit,
	.close = fw_close,
};

static int fake_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, unsigned flags,
			    struct smux_writer **out, struct smux_error *err)
{
	struct fake *f = to_fake(b);
	struct fake_writer *fw;

	if (strcmp(key, "block") == 0)
		block_in_read(f, ctx);
	fw = calloc(1, sizeof(*fw));
	if (!fw || smux_writer_init(&fw->base, &fake_writer_ops, b, key)) {
		free(fw);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	fw->f = f;
	atomic_fetch_add(&f->w_opened, 1);
	*out = &fw->base;
	return 0;
}

static void fake_destroy(struct smux_backend *b)
{
	struct fake *f = to_fake(b);

	close(f->pipe[0]);
	close(f->pipe[1]);
	pthread_mutex_destroy(&f->lock);
	smux_backend_release(b);
	free(f);
	atomic_fetch_add(&fake_destroyed, 1);
}

/* "ok" has user.k = "value"; "block" blocks first, then writes "LATE!"
 * into the buffer it was given (the job's, never the caller's). */
static int fake_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const char *name, void *buf,
			 size_t size, size_t *out_len, struct smux_error *err)
{
	struct fake *f = to_fake(b);
	int rc = 0;

	enter_op(f);
	if (strcmp(key, "block") == 0) {
		block_in_read(f, ctx);
		if (size >= 5)
			memcpy(buf, "LATE!", 5);
		*out_len = 5;
		atomic_store(&f->late_rc, 5);
	} else if (strcmp(key, "ok") == 0 && strcmp(name, "user.k") == 0) {
		if (size && size < 5)
			rc = smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
					    b->name, "small");
		else if (size)
			memcpy(buf, "value", 5);
		*out_len = 5;
	} else {
		rc = smux_error_set(err, SMUX_E_NO_ATTR, b->name, "none");
	}
	leave_op(f);
	return rc;
}

/* Keeps the value in last_put ("block": after blocking). */
static int fake_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const char *name, const void *value,
			 size_t size, int flags, struct smux_error *err)
{
	struct fake *f = to_fake(b);

	enter_op(f);
	if (strcmp(key, "block") == 0)
		block_in_read(f, ctx);
	pthread_mutex_lock(&f->lock);
	memset(f->last_put, 0, sizeof(f->last_put));
	memcpy(f->last_put, value,
	       size < sizeof(f->last_put) ? size : sizeof(f->last_put) - 1);
	pthread_mutex_unlock(&f->lock);
	if (strcmp(key, "block") == 0)
		atomic_store(&f->late_rc, (int)size);
	leave_op(f);
	return 0;
}

static unsigned fake_caps(struct smux_backend *b)
{
	return to_fake(b)->caps;
}

static const struct smux_backend_ops fake_ops = {
	.caps = fake_caps,
	.kind = "fake",
	.get = fake_get,
	.put = fake_put,
	.del = fake_del,
	.head = fake_head,
	.list = fake_list,
	.statfs = fake_statfs,
	.writer_open = fake_writer_open,
	.getxattr = fake_getxattr,
	.setxattr = fake_setxattr,
	.destroy = fake_destroy,
};

static struct fake *fake_new(const char *name)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(smux_backend_init(&f->base, &fake_ops, name), 0);
	assert_int_equal(pipe2(f->pipe, O_CLOEXEC), 0);
	pthread_mutex_init(&f->lock, NULL);
	atomic_init(&f->late_rc, LATE_UNSET);
	atomic_init(&f->list_late, LATE_UNSET);
	return f;
}

static void unblock(struct fake *f, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(write(f->pipe[1], "x", 1), 1);
}

/* ---- helpers ---- */

static int64_t ms_since(int64_t t0)
{
	return (smux_now_ns() - t0) / 1000000;
}

/* Polls @cond every millisecond for up to @ms, then asserts it. */
#define ASSERT_SOON(cond, ms)                                           \
	do {                                                            \
		int64_t until_ = smux_now_ns() + (int64_t)(ms)*1000000; \
		while (!(cond) && smux_now_ns() < until_)               \
			usleep(1000);                                   \
		assert_true(cond);                                      \
	} while (0)

/* Threads of this process (/proc/self/status), to see workers come/go. */
static int threads_now(void)
{
	char line[256];
	FILE *fp = fopen("/proc/self/status", "r");
	int n = -1;

	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		if (strncmp(line, "Threads:", 8) == 0) {
			n = (int)strtol(line + 8, NULL, 10);
			break;
		}
	}
	fclose(fp);
	return n;
}

static int base_threads;

static int setup(void **state)
{
	/* Workers of an earlier test are gone before the next starts. */
	base_threads = threads_now();
	return 0;
}

static int teardown(void **state)
{
	int64_t until = smux_now_ns() + 3000 * 1000000LL;

	while (threads_now() > base_threads && smux_now_ns() < until)
		usleep(1000);
	return threads_now() <= base_threads ? 0 : -1;
}

static struct smux__call get_call(struct fake *f, const char *key,
				  struct smux_sink *sink,
				  struct smux_info *info)
{
	struct smux__call c = {
		.op = SMUX__OP_GET,
		.backend = &f->base,
		.key = key,
		.sink = sink,
		.info = info,
	};

	return c;
}

static int collect(void *arg, const struct smux_list_entry *e)
{
	char *seen = arg;
	size_t n = strlen(seen);

	seen[n] = e->key[0];
	seen[n + 1] = '\0';
	return 0;
}

/* ---- tests ---- */

/* Results and outputs of every kind of operation reach the caller. */
static void test_normal_calls(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	struct smux_ctx ctx;
	struct smux_error err;
	struct smux_info info;
	struct smux_statfs sfs;
	struct smux_source src;
	struct smux_sink sink;
	struct smux__call c;
	char buf[32] = {0};
	char seen[8] = {0};

	assert_non_null(bh);
	smux_ctx_init(&ctx);

	smux_sink_buf(&sink, buf, sizeof(buf));
	memset(&info, 0, sizeof(info));
	c = get_call(f, "ok", &sink, &info);
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	assert_int_equal(err.e.code, SMUX_OK);
	assert_int_equal(sink.written, 11);
	assert_memory_equal(buf, "hello world", 11);
	assert_int_equal(info.size, 11);
	assert_string_equal(info.etag, "v1");

	/* A backend error comes back whole. */
	c = get_call(f, "missing", &sink, NULL);
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), -ENOENT);
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	assert_string_equal(err.e.backend, "m1");

	memset(&info, 0, sizeof(info));
	c = (struct smux__call){.op = SMUX__OP_HEAD,
				.backend = &f->base,
				.key = "ok",
				.info = &info};
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	assert_int_equal(info.size, 11);

	smux_source_buf(&src, "payload", 7);
	memset(&info, 0, sizeof(info));
	c = (struct smux__call){.op = SMUX__OP_PUT,
				.backend = &f->base,
				.key = "obj",
				.src = &src,
				.info = &info};
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	pthread_mutex_lock(&f->lock);
	assert_string_equal(f->last_put, "payload");
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(info.size, 7);

	c = (struct smux__call){.op = SMUX__OP_LIST,
				.backend = &f->base,
				.key = "",
				.key2 = "/",
				.list_fn = collect,
				.list_arg = seen};
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	assert_string_equal(seen, "abc");

	c = (struct smux__call){
		.op = SMUX__OP_STATFS, .backend = &f->base, .statfs = &sfs};
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	assert_int_equal(sfs.total_bytes, 1000);
	assert_int_equal(sfs.free_bytes, 400);

	c = (struct smux__call){
		.op = SMUX__OP_DEL, .backend = &f->base, .key = "obj"};
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 0, &c, &err), 0);
	c = (struct smux__call){.op = SMUX__OP_HEALTHCHECK,
				.backend = &f->base};
	assert_int_equal(smux__bulkhead_run(bh, NULL, 0, &c, &err), 0);
	/* An invalid key is refused by the dispatch wrapper, not the fake. */
	c = get_call(f, "../x", &sink, NULL);
	assert_int_not_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 0);
	assert_int_equal(err.e.code, SMUX_E_INVALID_KEY);

	assert_int_equal(smux__bulkhead_busy(bh), 0);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* The deadline is min(ctx deadline, now + timeout). */
static void test_deadline(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 0);
	struct smux_ctx ctx;
	struct smux__call c = {
		.op = SMUX__OP_DEL, .backend = &f->base, .key = "x"};
	struct smux__job *job;
	int64_t now = smux_now_ns();

	smux_ctx_init(&ctx);
	job = smux__bulkhead_start(bh, &ctx, 0, &c, NULL);
	assert_int_equal(smux__job_deadline(job), INT64_MAX);
	assert_int_equal(smux__job_finish(job, NULL), 0);

	job = smux__bulkhead_start(bh, &ctx, 200, &c, NULL);
	assert_true(smux__job_deadline(job) >= now + 200 * 1000000LL);
	assert_true(smux__job_deadline(job) < now + 400 * 1000000LL);
	assert_int_equal(smux__job_finish(job, NULL), 0);

	ctx.deadline_ns = now + 50 * 1000000LL;
	job = smux__bulkhead_start(bh, &ctx, 200, &c, NULL);
	assert_int_equal(smux__job_deadline(job), ctx.deadline_ns);
	assert_int_equal(smux__job_finish(job, NULL), 0);
	job = smux__bulkhead_start(bh, &ctx, 10000, &c, NULL);
	assert_int_equal(smux__job_deadline(job), ctx.deadline_ns);
	assert_int_equal(smux__job_finish(job, NULL), 0);

	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/*
 * A backend blocked in read(2): the caller gets BACKEND_TIMEOUT at the
 * deadline; what the backend does once unblocked never reaches the
 * caller's (by then freed) sink, source or callback argument.
 */
static void test_timeout_blocked_in_syscall(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	struct smux_sink *sink = calloc(1, sizeof(*sink));
	char *buf = calloc(1, 64);
	struct smux_error err;
	struct smux_ctx ctx;
	struct smux__call c;
	int64_t t0, ms;
	long rc;

	smux_ctx_init(&ctx);
	smux_sink_buf(sink, buf, 64);
	c = get_call(f, "block", sink, NULL);
	t0 = smux_now_ns();
	rc = smux__bulkhead_run(bh, &ctx, 100, &c, &err);
	ms = ms_since(t0);
	print_message("timeout latency: %lld ms for a 100 ms deadline\n",
		      (long long)ms);
	assert_int_equal(rc, -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_string_equal(err.e.backend, "m1");
	assert_true(ms >= 90 && ms <= 500);
	/* The backend is still inside read(2). */
	assert_int_equal(atomic_load(&f->blocked), 1);
	assert_int_equal(smux__bulkhead_busy(bh), 1);
	/* What it wrote while the caller waited did arrive. */
	assert_int_equal(sink->written, 5);
	assert_memory_equal(buf, "early", 5);
	/* Poison: ASan reports any later access as use-after-free. */
	free(buf);
	free(sink);

	unblock(f, 1);
	ASSERT_SOON(atomic_load(&f->late_rc) != LATE_UNSET, 2000);
	assert_int_equal(atomic_load(&f->late_rc), -ECANCELED);
	assert_int_equal(atomic_load(&f->woke_reason), SMUX_CANCEL_TIMEOUT);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);

	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/*
 * getxattr and setxattr: the value lands in the caller's buffer only when
 * it fits (a size query copies nothing) and the length comes back as the
 * result; a blocked one times out, and what the backend writes or reads
 * afterwards touches the job's copies, never the caller's (freed) buffers.
 */
static void test_xattr_calls(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	char *rbuf = calloc(1, 16), *wbuf = strdup("payload");
	struct smux_error err;
	struct smux_ctx ctx;
	long n = -1, rc;
	struct smux__call c = {.op = SMUX__OP_GETXATTR,
			       .backend = &f->base,
			       .key = "ok",
			       .key2 = "user.k",
			       .rbuf = rbuf,
			       .len = 16,
			       .nread = &n};

	smux_ctx_init(&ctx);
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 5);
	assert_int_equal(n, 5);
	assert_memory_equal(rbuf, "value", 5);
	memset(rbuf, 0, 16);
	c.len = 0; /* a size query */
	assert_int_equal(smux__bulkhead_run(bh, &ctx, 1000, &c, &err), 5);
	assert_int_equal(rbuf[0], 0);
	c.len = 16;
	c.key2 = "user.none";
	rc = smux__bulkhead_run(bh, &ctx, 1000, &c, &err);
	assert_int_equal(rc, -ENODATA);
	assert_int_equal(err.e.code, SMUX_E_NO_ATTR);

	/* blocked: timeout, then the late write goes to the job's copy */
	c.key = "block";
	c.key2 = "user.k";
	rc = smux__bulkhead_run(bh, &ctx, 100, &c, &err);
	assert_int_equal(rc, -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	free(rbuf); /* ASan reports any later access */
	unblock(f, 1);
	ASSERT_SOON(atomic_load(&f->late_rc) == 5, 2000);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);

	/* setxattr: the value is copied into the job at start */
	atomic_store(&f->late_rc, LATE_UNSET);
	memset(&c, 0, sizeof(c));
	c.op = SMUX__OP_SETXATTR;
	c.backend = &f->base;
	c.key = "block";
	c.key2 = "user.k";
	c.wbuf = wbuf;
	c.len = strlen(wbuf);
	rc = smux__bulkhead_run(bh, &ctx, 100, &c, &err);
	assert_int_equal(rc, -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	free(wbuf);
	unblock(f, 1);
	ASSERT_SOON(atomic_load(&f->late_rc) == 7, 2000);
	pthread_mutex_lock(&f->lock);
	assert_string_equal(f->last_put, "payload");
	pthread_mutex_unlock(&f->lock);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);

	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* Same for put (source proxy) and list (callback proxy), at once. */
static void test_timeout_source_and_callback(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	char *payload = strdup("secret");
	struct smux_source *src = calloc(1, sizeof(*src));
	char *seen = calloc(1, 8);
	struct smux__job *put, *list;
	struct smux_error err;
	struct smux__call c;
	int64_t t0;

	smux_source_buf(src, payload, 6);
	t0 = smux_now_ns();
	c = (struct smux__call){.op = SMUX__OP_PUT,
				.backend = &f->base,
				.key = "block",
				.src = src};
	put = smux__bulkhead_start(bh, NULL, 100, &c, NULL);
	c = (struct smux__call){.op = SMUX__OP_LIST,
				.backend = &f->base,
				.key = "block",
				.list_fn = collect,
				.list_arg = seen};
	list = smux__bulkhead_start(bh, NULL, 100, &c, NULL);
	assert_non_null(put);
	assert_non_null(list);
	assert_int_equal(smux__job_finish(put, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(smux__job_finish(list, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_true(ms_since(t0) >= 90 && ms_since(t0) <= 500);
	ASSERT_SOON(atomic_load(&f->blocked) == 2, 1000);
	/* The listing reached the callback once before blocking. */
	assert_string_equal(seen, "a");
	free(payload);
	free(src);
	free(seen);

	unblock(f, 2);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	/* The source read failed, the callback proxy said "stop". */
	assert_int_equal(atomic_load(&f->late_rc), -ECANCELED);
	assert_int_equal(atomic_load(&f->list_late), 1);
	pthread_mutex_lock(&f->lock);
	assert_string_equal(f->last_put, "");
	pthread_mutex_unlock(&f->lock);

	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

struct firer {
	struct smux_cancel *token;
	enum smux_cancel_reason why;
	int delay_ms;
};

static void *fire_later(void *arg)
{
	struct firer *fi = arg;

	usleep((useconds_t)fi->delay_ms * 1000);
	smux_cancel_fire(fi->token, fi->why);
	return NULL;
}

/* A token fired from another thread stops the wait promptly. */
static void check_cancel(enum smux_cancel_reason why, enum smux_code code)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux_cancel token;
	struct firer fi = {.token = &token, .why = why, .delay_ms = 50};
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;
	struct smux__call c;
	char buf[16];
	pthread_t tid;
	int64_t t0, ms;
	long rc;

	smux_cancel_init(&token);
	smux_ctx_init(&ctx);
	ctx.cancel[0] = &token;
	smux_sink_buf(&sink, buf, sizeof(buf));
	c = get_call(f, "block", &sink, NULL);
	t0 = smux_now_ns();
	assert_int_equal(pthread_create(&tid, NULL, fire_later, &fi), 0);
	rc = smux__bulkhead_run(bh, &ctx, 0, &c, &err); /* no deadline */
	ms = ms_since(t0);
	pthread_join(tid, NULL);
	assert_int_equal(rc, -smux_code_errno(code));
	assert_int_equal(err.e.code, code);
	assert_true(ms >= 45 && ms <= 300);
	assert_int_equal(atomic_load(&f->blocked), 1);
	/* The caller's token may go now: the worker never saw it. */
	smux_cancel_release(&token);
	memset(&token, 0xa5, sizeof(token));

	unblock(f, 1);
	ASSERT_SOON(atomic_load(&f->late_rc) != LATE_UNSET, 2000);
	assert_int_equal(atomic_load(&f->late_rc), -ECANCELED);
	/* The job's own token carried the reason to the backend. */
	assert_int_equal(atomic_load(&f->woke_reason), why);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

static void test_caller_abort(void **state)
{
	check_cancel(SMUX_CANCEL_ABORT, SMUX_E_BACKEND_ABORTED);
	check_cancel(SMUX_CANCEL_DRAIN, SMUX_E_BACKEND_DRAINING);
}

/*
 * max_inflight 2 and 4 blocking jobs: two run, two wait in the queue, and
 * the queued ones time out one budget after they were queued (marked as
 * never started: test_queued_unstarted).
 */
static void test_bounded_concurrency(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux__job *jobs[4];
	struct smux_sink sinks[4];
	char bufs[4][16];
	struct smux_error err;
	struct smux__call c;
	int64_t t0;

	t0 = smux_now_ns();
	for (int i = 0; i < 4; i++) {
		smux_sink_buf(&sinks[i], bufs[i], sizeof(bufs[i]));
		c = get_call(f, "block", &sinks[i], NULL);
		jobs[i] = smux__bulkhead_start(bh, NULL, 300, &c, NULL);
		assert_non_null(jobs[i]);
	}
	ASSERT_SOON(atomic_load(&f->blocked) == 2, 1000);
	usleep(50000);
	assert_int_equal(atomic_load(&f->blocked), 2);
	assert_int_equal(atomic_load(&f->max_running), 2);
	assert_int_equal(atomic_load(&f->calls), 2);
	assert_int_equal(smux__bulkhead_busy(bh), 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(smux__job_finish(jobs[i], &err),
				 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
		assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	}
	assert_true(ms_since(t0) >= 290 && ms_since(t0) <= 600);
	/* Abandoned queued jobs left the queue; the two stuck ones stay. */
	assert_int_equal(smux__bulkhead_busy(bh), 2);
	unblock(f, 2);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	assert_int_equal(atomic_load(&f->calls), 2);
	assert_int_equal(atomic_load(&f->max_running), 2);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* A queued job runs (FIFO) once a slot frees up within its deadline. */
static void test_queue_served(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 1);
	struct smux_sink s1, s2;
	char b1[16], b2[16];
	struct smux__job *a, *b;
	struct smux__call c;

	smux_sink_buf(&s1, b1, sizeof(b1));
	smux_sink_buf(&s2, b2, sizeof(b2));
	c = get_call(f, "block", &s1, NULL);
	a = smux__bulkhead_start(bh, NULL, 3000, &c, NULL);
	c = get_call(f, "ok", &s2, NULL);
	b = smux__bulkhead_start(bh, NULL, 3000, &c, NULL);
	ASSERT_SOON(atomic_load(&f->blocked) == 1, 1000);
	usleep(20000);
	assert_false(smux__job_done(b));
	assert_int_equal(smux__bulkhead_busy(bh), 2);
	unblock(f, 1);
	assert_int_equal(smux__job_finish(a, NULL), 0);
	assert_int_equal(smux__job_finish(b, NULL), 0);
	assert_int_equal(s1.written, 9);
	assert_memory_equal(b1, "earlyLATE", 9);
	assert_memory_equal(b2, "hello world", 11);
	assert_int_equal(atomic_load(&f->max_running), 1);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/*
 * Issue 9 part D: a job queued behind max_inflight that never starts
 * within its budget fails with a BACKEND_TIMEOUT marked as never started
 * (the member is not to blame); a job that runs gets its budget from when
 * a worker starts it.
 */
static void test_queued_unstarted(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 1);
	struct smux_sink s1, s2;
	char b1[16], b2[16];
	struct smux_error err;
	struct smux__job *a, *b;
	struct smux__call c;

	smux_sink_buf(&s1, b1, sizeof(b1));
	smux_sink_buf(&s2, b2, sizeof(b2));
	c = get_call(f, "block", &s1, NULL);
	a = smux__bulkhead_start(bh, NULL, 0, &c, NULL); /* no budget */
	ASSERT_SOON(atomic_load(&f->blocked) == 1, 1000);
	c = get_call(f, "ok", &s2, NULL);
	b = smux__bulkhead_start(bh, NULL, 100, &c, NULL);
	assert_int_equal(smux__job_finish(b, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_true(smux__bulkhead_unstarted(&err));
	assert_int_equal(atomic_load(&f->calls), 1);
	unblock(f, 1);
	assert_int_equal(smux__job_finish(a, &err), 0);
	assert_false(smux__bulkhead_unstarted(&err));
	/* a job that ran out of its own budget is the member's (however
	 * late the worker started it) */
	c = get_call(f, "block", &s1, NULL);
	a = smux__bulkhead_start(bh, NULL, 100, &c, NULL);
	ASSERT_SOON(atomic_load(&f->blocked) == 1, 1000);
	assert_int_equal(smux__job_finish(a, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_false(smux__bulkhead_unstarted(&err));
	unblock(f, 1);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* Race: first success wins, the losers are abandoned (no leak, no UAF). */
static void test_race_group(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	static const char *const keys[3] = {"block", "ok", "block"};
	struct smux__group *g = calloc(1, sizeof(*g));
	struct smux__job *jobs[3];
	struct smux_sink *sinks[3];
	char *bufs[3];
	int64_t until = smux_now_ns() + 2000 * 1000000LL;
	unsigned seen = 0;
	int winner = -1;
	struct smux_error err;

	smux__group_init(g);
	for (int i = 0; i < 3; i++) {
		struct smux__call c;

		sinks[i] = calloc(1, sizeof(*sinks[i]));
		bufs[i] = calloc(1, 32);
		smux_sink_buf(sinks[i], bufs[i], 32);
		c = get_call(f, keys[i], sinks[i], NULL);
		jobs[i] = smux__bulkhead_start(bh, NULL, 2000, &c, g);
		assert_non_null(jobs[i]);
	}
	/* The losers are running (stuck in read) when they are abandoned. */
	ASSERT_SOON(atomic_load(&f->blocked) == 2, 2000);
	while (winner < 0 && smux_now_ns() < until) {
		seen = smux__group_wait(g, seen, until);
		for (int i = 0; i < 3; i++)
			if (winner < 0 && smux__job_done(jobs[i]))
				winner = i;
	}
	assert_int_equal(winner, 1);
	assert_int_equal(smux__job_finish(jobs[1], &err), 0);
	assert_memory_equal(bufs[1], "hello world", 11);
	smux__job_abandon(jobs[0], SMUX_CANCEL_ABORT);
	smux__job_abandon(jobs[2], SMUX_CANCEL_ABORT);
	smux__group_release(g);
	free(g);
	for (int i = 0; i < 3; i++) {
		free(bufs[i]);
		free(sinks[i]);
	}
	assert_int_equal(atomic_load(&f->blocked), 2);
	unblock(f, 2);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	assert_int_equal(atomic_load(&f->late_rc), -ECANCELED);
	assert_int_equal(atomic_load(&f->woke_reason), SMUX_CANCEL_ABORT);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

static long wcall(struct smux__bulkhead *bh, struct smux__call *c,
		  int64_t timeout_ms, struct smux_error *err)
{
	return smux__bulkhead_run(bh, NULL, timeout_ms, c, err);
}

/* A writer of @key on @f, opened through @bh. */
static struct smux_writer *wopen(struct smux__bulkhead *bh, struct fake *f,
				 const char *key)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux__call c = {.op = SMUX__OP_WRITER_OPEN,
			       .backend = &f->base,
			       .key = key,
			       .writer_out = &w};

	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	assert_non_null(w);
	return w;
}

/* Whether the last head or pwrite of @f ran on this thread. */
static bool ran_here(struct fake *f)
{
	return pthread_equal((pthread_t)atomic_load(&f->last_tid),
			     pthread_self());
}

/*
 * SMUX_CAP_INLINE: a short call runs on the caller's thread, and no
 * worker starts for it; a stream, a member without the capability, a
 * member with a call running for longer than 200 ms (maybe stuck) and a
 * writer whose lock is taken go through a worker, with their deadline.
 */
static void test_inline_calls(void **state)
{
	struct fake *f = fake_new("m1"), *g = fake_new("m2");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 4);
	struct smux__bulkhead *bg = smux__bulkhead_new("m2", 4);
	pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
	struct smux_writer *w = NULL;
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .backend = &f->base, .key = "ok"};
	struct smux__call c;
	struct smux_error err;
	struct smux_info info;
	struct smux_sink sink;
	struct smux__job *stuck, *job;
	char got[64] = {0};
	char *big;
	int64_t t0;

	f->caps = SMUX_CAP_INLINE;
	head.info = &info;
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &head, &err), 0);
	assert_int_equal(info.size, 11);
	assert_true(ran_here(f));
	assert_int_equal(threads_now(), base_threads); /* no worker */
	/* errors come back the same way */
	head.key = "missing";
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &head, &err),
			 -ENOENT);
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	head.key = "ok";

	/* without the capability: a worker */
	head.backend = &g->base;
	assert_int_equal(smux__bulkhead_run(bg, NULL, 1000, &head, &err), 0);
	assert_false(ran_here(g));
	head.backend = &f->base;

	/* a writer's calls inline, unless its lock is taken */
	w = wopen(bh, f, "w");
	c = (struct smux__call){.op = SMUX__OP_W_PWRITE,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.wbuf = "abc",
				.len = 3};
	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	assert_true(ran_here(f));
	/* more than 64 KiB: a worker (a fan-out copies in parallel) */
	big = calloc(1, 64 * 1024 + 1);
	assert_non_null(big);
	c.wbuf = big;
	c.len = 64 * 1024 + 1;
	assert_int_equal(wcall(bh, &c, 1000, &err),
			 -smux_code_errno(SMUX_E_NO_SPACE)); /* the fake's */
	assert_false(ran_here(f));
	free(big);
	c.wbuf = "abc";
	c.len = 3;
	pthread_mutex_lock(&wlock);
	job = smux__bulkhead_start(bh, NULL, 1000, &c, NULL);
	assert_non_null(job);
	usleep(20000);
	assert_false(smux__job_done(job)); /* the worker waits for the lock */
	pthread_mutex_unlock(&wlock);
	assert_int_equal(smux__job_finish(job, &err), 0);
	assert_false(ran_here(f));

	/* a stream always goes to a worker; one blocked for longer than
	 * 200 ms makes every call of the member go there too, each with
	 * its deadline: a head that blocks as well times out */
	smux_sink_buf(&sink, got, sizeof(got));
	c = get_call(f, "block", &sink, NULL);
	stuck = smux__bulkhead_start(bh, NULL, 0, &c, NULL);
	assert_non_null(stuck);
	ASSERT_SOON(atomic_load(&f->blocked) == 1, 2000);
	usleep(250 * 1000);
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &head, &err), 0);
	assert_false(ran_here(f));
	head.key = "block";
	t0 = smux_now_ns();
	assert_int_equal(smux__bulkhead_run(bh, NULL, 100, &head, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_true(ms_since(t0) < 1000);
	unblock(f, 2);
	assert_int_equal(smux__job_finish(stuck, &err), 0);
	ASSERT_SOON(atomic_load(&f->blocked) == 0, 2000);
	/* nothing running: inline again */
	head.key = "ok";
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &head, &err), 0);
	assert_true(ran_here(f));

	c = (struct smux__call){
		.op = SMUX__OP_W_CLOSE, .backend = &f->base, .writer = w};
	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	smux__bulkhead_free(bh);
	smux__bulkhead_free(bg);
	smux_backend_unref(&f->base);
	smux_backend_unref(&g->base);
}

/* Writer operations: outputs, and serialisation through writer_lock. */
static void test_writer_ops(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
	struct smux_writer *w = NULL;
	struct smux__job *close_job;
	struct smux_error err;
	struct smux_info info;
	struct smux__call c;
	char rbuf[16] = {0};
	char *wbuf;
	long nread = 0;

	w = wopen(bh, f, "obj");

	c = (struct smux__call){.op = SMUX__OP_W_PWRITE,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.wbuf = "hello",
				.len = 5};
	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	c = (struct smux__call){.op = SMUX__OP_W_PREAD,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.rbuf = rbuf,
				.len = sizeof(rbuf),
				.off = 1,
				.nread = &nread};
	assert_int_equal(wcall(bh, &c, 1000, &err), 4);
	assert_int_equal(nread, 4);
	assert_string_equal(rbuf, "ello");
	c = (struct smux__call){.op = SMUX__OP_W_TRUNCATE,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.off = 3};
	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	memset(&info, 0, sizeof(info));
	c = (struct smux__call){.op = SMUX__OP_W_COMMIT,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.info = &info};
	assert_int_equal(wcall(bh, &c, 1000, &err), 0);
	assert_int_equal(info.size, 3);

	/* A pwrite stuck in read(2) times out; its buffer is copied. */
	wbuf = strdup("BLOCK-data");
	c = (struct smux__call){.op = SMUX__OP_W_PWRITE,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock,
				.wbuf = wbuf,
				.len = 10};
	assert_int_equal(wcall(bh, &c, 100, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	free(wbuf);
	assert_int_equal(atomic_load(&f->blocked), 1);

	/* The close waits for the stuck pwrite instead of racing it. */
	c = (struct smux__call){.op = SMUX__OP_W_CLOSE,
				.backend = &f->base,
				.writer = w,
				.writer_lock = &wlock};
	close_job = smux__bulkhead_start(bh, NULL, 5000, &c, NULL);
	assert_non_null(close_job);
	usleep(50000);
	assert_false(smux__job_done(close_job));
	assert_int_equal(atomic_load(&f->w_closed), 0);
	unblock(f, 1);
	assert_int_equal(smux__job_finish(close_job, &err), 0);
	assert_int_equal(atomic_load(&f->w_closed), 1);
	assert_int_equal(atomic_load(&f->overlap), 0);
	pthread_mutex_lock(&f->lock);
	assert_string_equal(f->last_pwrite, "BLOCK-data");
	pthread_mutex_unlock(&f->lock);

	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	pthread_mutex_destroy(&wlock);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* A writer opened after the caller gave up is closed by the worker. */
static void test_writer_open_abandoned(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux_writer *w = (struct smux_writer *)&w;
	struct smux_error err;
	struct smux__call c = {.op = SMUX__OP_WRITER_OPEN,
			       .backend = &f->base,
			       .key = "block",
			       .writer_out = &w};

	assert_int_equal(wcall(bh, &c, 100, &err),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_null(w);
	unblock(f, 1);
	ASSERT_SOON(atomic_load(&f->w_closed) == 1, 2000);
	assert_int_equal(atomic_load(&f->w_opened), 1);
	ASSERT_SOON(smux__bulkhead_busy(bh) == 0, 2000);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/* Freeing with a worker stuck returns at once; the worker frees later. */
static void test_free_while_stuck(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux_sink sink;
	char buf[16];
	struct smux__call c = get_call(f, "block", &sink, NULL);
	int destroyed = atomic_load(&fake_destroyed);
	int64_t t0;

	smux_sink_buf(&sink, buf, sizeof(buf));
	assert_int_equal(smux__bulkhead_run(bh, NULL, 100, &c, NULL),
			 -smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(threads_now(), base_threads + 1);
	t0 = smux_now_ns();
	smux__bulkhead_free(bh);
	assert_true(ms_since(t0) < 50);
	smux_backend_unref(&f->base); /* the stuck job holds the last ref */
	usleep(20000);
	assert_int_equal(atomic_load(&fake_destroyed), destroyed);
	assert_int_equal(atomic_load(&f->blocked), 1);

	unblock(f, 1);
	ASSERT_SOON(atomic_load(&fake_destroyed) == destroyed + 1, 2000);
	ASSERT_SOON(threads_now() == base_threads, 2000);
}

/* Idle workers retire after about 2 s; new work starts new ones. */
static void test_idle_retire(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux__call c = {
		.op = SMUX__OP_DEL, .backend = &f->base, .key = "x"};
	int64_t t0;

	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &c, NULL), 0);
	assert_int_equal(threads_now(), base_threads + 1);
	t0 = smux_now_ns();
	ASSERT_SOON(threads_now() == base_threads, 4000);
	assert_true(ms_since(t0) >= 1500);
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &c, NULL), 0);
	assert_int_equal(threads_now(), base_threads + 1);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

/*
 * Freeing a bulkhead joins its idle workers: their thread-local state is
 * released before free returns (at unmount, before the process exits),
 * not by a thread still ending in the background (LSan's "leak" of
 * OpenSSL's per-thread state in the daemon).
 */
static void test_free_joins_idle_workers(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux__call c = {
		.op = SMUX__OP_DEL, .backend = &f->base, .key = "tls"};

	atomic_store(&tls_go, 0);
	atomic_store(&tls_freed, 0);
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &c, NULL), 0);
	assert_int_equal(threads_now(), base_threads + 1);
	smux__bulkhead_free(bh);
	assert_int_equal(atomic_load(&tls_freed), 1);
	assert_int_equal(threads_now(), base_threads);
	atomic_store(&tls_go, 1);
	smux_backend_unref(&f->base);
}

/* A worker that retired when idle is joined by the next call, and its
 * thread-local state was released. */
static void test_retired_worker_joined(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 2);
	struct smux__call c = {
		.op = SMUX__OP_DEL, .backend = &f->base, .key = "tls"};

	atomic_store(&tls_go, 1);
	atomic_store(&tls_freed, 0);
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &c, NULL), 0);
	ASSERT_SOON(atomic_load(&tls_freed) == 1, 4000);
	ASSERT_SOON(threads_now() == base_threads, 1000);
	assert_int_equal(smux__bulkhead_run(bh, NULL, 1000, &c, NULL), 0);
	smux__bulkhead_free(bh);
	assert_int_equal(atomic_load(&tls_freed), 2);
	smux_backend_unref(&f->base);
}

/* ---- many threads (meant for TSan) ---- */

struct stress {
	struct smux__bulkhead *bh;
	struct fake *f;
	int timeouts;
	int failures;
};

static void stress_one(struct stress *st, int i)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_source src;
	struct smux_sink sink;
	struct smux__call c;
	char buf[32];
	char seen[8] = {0};
	long rc;

	switch (i % 5) {
	case 0:
		smux_sink_buf(&sink, buf, sizeof(buf));
		c = get_call(st->f, "ok", &sink, &info);
		rc = smux__bulkhead_run(st->bh, NULL, 5000, &c, &err);
		if (rc || sink.written != 11 || info.size != 11 ||
		    memcmp(buf, "hello world", 11) != 0)
			st->failures++;
		break;
	case 1:
		c = (struct smux__call){.op = SMUX__OP_HEAD,
					.backend = &st->f->base,
					.key = "ok",
					.info = &info};
		if (smux__bulkhead_run(st->bh, NULL, 5000, &c, &err) ||
		    info.size != 11)
			st->failures++;
		break;
	case 2:
		smux_source_buf(&src, "data", 4);
		c = (struct smux__call){.op = SMUX__OP_PUT,
					.backend = &st->f->base,
					.key = "k",
					.src = &src};
		if (smux__bulkhead_run(st->bh, NULL, 5000, &c, &err))
			st->failures++;
		break;
	case 3:
		c = (struct smux__call){.op = SMUX__OP_LIST,
					.backend = &st->f->base,
					.key = "",
					.list_fn = collect,
					.list_arg = seen};
		if (smux__bulkhead_run(st->bh, NULL, 5000, &c, &err) ||
		    strcmp(seen, "abc") != 0)
			st->failures++;
		break;
	default:
		if (i % 50 != 4)
			break;
		/* Sleeps 3 ms against a 1 ms deadline: abandoned mid-way,
		 * its second write hits a sink gone with this frame. */
		smux_sink_buf(&sink, buf, sizeof(buf));
		c = get_call(st->f, "slow", &sink, NULL);
		rc = smux__bulkhead_run(st->bh, NULL, 1, &c, &err);
		if (rc == -smux_code_errno(SMUX_E_BACKEND_TIMEOUT))
			st->timeouts++;
		else if (rc || sink.written != 4) /* done before we looked */
			st->failures++;
		break;
	}
}

static void *stress_main(void *arg)
{
	struct stress *st = arg;

	for (int i = 0; i < 1000; i++)
		stress_one(st, i);
	return NULL;
}

static void test_many_threads(void **state)
{
	struct fake *f = fake_new("m1");
	struct smux__bulkhead *bh = smux__bulkhead_new("m1", 3);
	struct stress st[4];
	pthread_t tids[4];

	for (int i = 0; i < 4; i++) {
		st[i] = (struct stress){.bh = bh, .f = f};
		assert_int_equal(
			pthread_create(&tids[i], NULL, stress_main, &st[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(tids[i], NULL);
		assert_int_equal(st[i].failures, 0);
		assert_in_range(st[i].timeouts, 1, 20);
	}
	assert_true(atomic_load(&f->max_running) <= 3);
	smux__bulkhead_free(bh);
	smux_backend_unref(&f->base);
}

static void *nothing(void *arg)
{
	return arg;
}

int main(void)
{
	pthread_t tid;

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_normal_calls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_blocked_in_syscall,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_timeout_source_and_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_caller_abort, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bounded_concurrency, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_queued_unstarted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_queue_served, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_race_group, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_ops, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inline_calls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_open_abandoned,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattr_calls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_free_while_stuck, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idle_retire, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_many_threads, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_free_joins_idle_workers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_retired_worker_joined,
						setup, teardown),
	};

	alarm(60); /* a hang fails the run instead of stalling it */
	if (pthread_key_create(&tls_key, tls_destructor))
		return 1;
	/* Sanitizer runtimes start a helper thread at the first
	 * pthread_create; let that happen before threads are counted. */
	if (pthread_create(&tid, NULL, nothing, NULL) == 0)
		pthread_join(tid, NULL);
	usleep(10000);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
