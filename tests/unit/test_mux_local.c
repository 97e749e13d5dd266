// SPDX-License-Identifier: MIT
/*
 * test_mux_local.c - errors of the caller's side are their own class
 * (issue 9 item 5, DESIGN section 6 "Local errors are not backend
 * errors"), and a request a backend refuses as too large is semantic:
 *
 *  - a get whose sink fails with ENOSPC (a callback, and a real pwrite to
 *    /dev/full) returns ENOSPC as STORAGE.LOCAL_IO_ERROR in every mode
 *    (mirror race, failover walk, sticky, a nested mux): one member was
 *    asked, none is marked down or charged an error, and the next reads
 *    work;
 *  - a put whose source fails with EIO returns EIO, local, on a mirror: no
 *    replica down, no hint;
 *  - a copy that spools through a full TMPDIR (a real 64 KiB tmpfs) fails
 *    with ENOSPC and blames no shard;
 *  - a backend's own read failure stays the backend's (transient);
 *  - truncate to 999999999999999 bytes on a mirror of two file members is
 *    EFBIG, both stay up, the next delete works.
 *
 * Every case here failed on main before the fix (the sink's ENOSPC was
 * STORAGE.NO_SPACE, transient: members down, EIO for the next reads).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_writer.h" /* smux__callerr_spool_pread_hook */
#include "mux_helpers.h"
#include "smux/file.h"

#define LOCAL_NAME "STORAGE.LOCAL_IO_ERROR"

/* Two (or three) file members under one temporary directory. */
struct lt {
	char dir[64];
	unsigned n;
	struct smux_backend *file[3];
	struct smux_backend *mux;
	struct smux_ctx ctx;
};

static void lt_init(struct lt *t, enum smux_mode mode, unsigned n)
{
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 60000};
	struct smux_error err;
	char path[128], name[16];

	memset(t, 0, sizeof(*t));
	t->n = n;
	smux_ctx_init(&t->ctx);
	snprintf(t->dir, sizeof(t->dir), "/tmp/smux-local-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	for (unsigned i = 0; i < n; i++) {
		struct smux_file_opts fo = {.path = path, .no_fsync = true};

		snprintf(path, sizeof(path), "%s/m%u", t->dir, i);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(name, sizeof(name), "m%u", i);
		MH_OK(smux_file_new(name, &fo, &t->file[i], &err), &err);
	}
	t->mux = mh_mux("mx", &o, t->file, NULL, n);
}

static void lt_release(struct lt *t)
{
	smux_backend_unref(t->mux);
	for (unsigned i = 0; i < t->n; i++)
		smux_backend_unref(t->file[i]);
	mh_rm_rf(t->dir);
}

/* Asserts every member of @mux is up and was charged no error (with
 * @any_errors: up, no failure against its health; a semantic answer or a
 * race lost inside a nested mux still counts in `errors`). */
#define LT_ALL_UP(mux)	lt_all_up_at((mux), false, __FILE__, __LINE__)
#define LT_HEALTHY(mux) lt_all_up_at((mux), true, __FILE__, __LINE__)
static void lt_all_up_at(struct smux_backend *mux, bool any_errors,
			 const char *file, int line)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);

	assert_non_null(st);
	for (unsigned i = 0; i < st->n_backends; i++) {
		if (st->backends[i].status == SMUX_STATUS_UP &&
		    (any_errors || st->backends[i].errors == 0) &&
		    st->backends[i].consecutive_failures == 0)
			continue;
		print_error("member %s: %s, %llu errors, %u failures\n",
			    st->backends[i].name,
			    smux_status_name(st->backends[i].status),
			    (unsigned long long)st->backends[i].errors,
			    st->backends[i].consecutive_failures);
		smux_mux_stats_free(st);
		_fail(file, line);
	}
	smux_mux_stats_free(st);
}

/* Member calls of @mux so far (hits, misses, errors). */
static uint64_t lt_calls(struct smux_backend *mux)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);
	uint64_t n = 0;

	for (unsigned i = 0; i < st->n_backends; i++)
		n += st->backends[i].hits + st->backends[i].misses +
		     st->backends[i].errors;
	smux_mux_stats_free(st);
	return n;
}

/* Asserts a failure of the caller's side with errno @eno. */
#define LT_LOCAL(rc, err, eno) \
	lt_local_at((rc), (err), (eno), __FILE__, __LINE__)
static void lt_local_at(long rc, const struct smux_error *err, int eno,
			const char *file, int line)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	if (rc == -eno && err->e.sys_errno == eno &&
	    strcmp(smux_code_name(err->e.code), LOCAL_NAME) == 0 &&
	    strcmp(smux_outcome_name(smux_classify(&err->e)), "local") == 0)
		return;
	print_error("expected %s with errno %d, got rc %ld: %s\n", LOCAL_NAME,
		    eno, rc, smux_error_format(err, buf, sizeof(buf)));
	_fail(file, line);
}

/* A sink that refuses everything with ENOSPC (a full cache directory). */
static int full_write(void *arg, const void *data, size_t len)
{
	(void)data;
	(void)len;
	atomic_fetch_add((atomic_int *)arg, 1);
	return -ENOSPC;
}

static int full_rewind(void *arg)
{
	(void)arg;
	return 0;
}

/* get @key from @b into a sink that fails with ENOSPC; *@writes (may be
 * NULL) gets the number of writes the sink refused. */
static int get_full(struct lt *t, struct smux_backend *b, const char *key,
		    int *writes, struct smux_error *err)
{
	struct smux_sink sink;
	atomic_int n = 0;
	int rc;

	smux_sink_cb(&sink, full_write, full_rewind, &n);
	rc = smux_backend_get(b, &t->ctx, key, NULL, &sink, NULL, err);
	if (writes)
		*writes = atomic_load(&n);
	return rc;
}

/* The reproduction: 8 reads through a full cache on a mirror. */
static void check_sink_full(enum smux_mode mode, unsigned n)
{
	struct smux_error err;
	char key[16], val[32];
	struct lt t;
	int writes;

	lt_init(&t, mode, n);
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "f%d", i);
		snprintf(val, sizeof(val), "content %d", i);
		if (mode != SMUX_MODE_ROUND_ROBIN) {
			MH_OK(mh_put(t.mux, key, val, &err), &err);
			continue;
		}
		/* a read pool of identical replicas */
		for (unsigned j = 0; j < n; j++)
			MH_OK(mh_put(t.file[j], key, val, &err), &err);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "f%d", i);
		LT_LOCAL(get_full(&t, t.mux, key, &writes, &err), &err, ENOSPC);
		/* no fall-through: one member delivered, once (a race may
		 * start more, but only the first to deliver reaches the
		 * sink) */
		assert_int_equal(writes, 1);
		LT_ALL_UP(t.mux);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "f%d", i);
		snprintf(val, sizeof(val), "content %d", i);
		MH_HOLDS(t.mux, key, val);
	}
	LT_ALL_UP(t.mux);
	lt_release(&t);
}

static void test_sink_full_mirror(void **state)
{
	(void)state;
	check_sink_full(SMUX_MODE_MIRROR, 2);
}

static void test_sink_full_failover(void **state)
{
	(void)state;
	check_sink_full(SMUX_MODE_FAILOVER, 2);
}

static void test_sink_full_round_robin(void **state)
{
	(void)state;
	check_sink_full(SMUX_MODE_ROUND_ROBIN, 3);
}

static void test_sink_full_sticky(void **state)
{
	(void)state;
	check_sink_full(SMUX_MODE_STICKY, 3);
}

static void test_sink_full_shield(void **state)
{
	(void)state;
	check_sink_full(SMUX_MODE_SHIELD, 2);
}

/* A real fd sink on a full device: pwrite fails with ENOSPC. */
static void test_sink_dev_full(void **state)
{
	struct smux_error err;
	struct smux_sink sink;
	struct lt t;
	int fd;

	(void)state;
	lt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(mh_put(t.mux, "a", "some bytes", &err), &err);
	fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	smux_sink_fd(&sink, fd, 0);
	LT_LOCAL(smux_backend_get(t.mux, &t.ctx, "a", NULL, &sink, NULL, &err),
		 &err, ENOSPC);
	close(fd);
	LT_ALL_UP(t.mux);
	MH_HOLDS(t.mux, "a", "some bytes");
	lt_release(&t);
}

/* A mux inside a mux: the inner one's local error stays local (not
 * wrapped as ALL_BACKENDS_DOWN) and the outer one blames no one either. */
static void test_sink_full_nested(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *outer, *members[2];
	struct smux_error err;
	struct lt inner;

	(void)state;
	lt_init(&inner, SMUX_MODE_FAILOVER, 2);
	members[0] = inner.mux;
	members[1] = mh_memory("mem");
	outer = mh_mux("outer", &o, members, NULL, 2);
	MH_OK(mh_put(outer, "k", "nested", &err), &err);
	for (int i = 0; i < 4; i++) {
		LT_LOCAL(get_full(&inner, outer, "k", NULL, &err), &err,
			 ENOSPC);
		LT_ALL_UP(outer);
		LT_HEALTHY(inner.mux); /* may have lost the outer race */
	}
	MH_HOLDS(outer, "k", "nested");
	smux_backend_unref(outer);
	smux_backend_unref(members[1]);
	lt_release(&inner);
}

/* A backend that fails reading its own file is still the backend's
 * failure: the mux falls through and charges it. */
static void test_backend_own_failure(void **state)
{
	struct smux_faulty_opts fail_gets = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem[2], *f[2], *mux;
	struct smux_mux_stats *st;
	struct smux_error err;

	(void)state;
	mem[0] = mh_memory("mem0");
	mem[1] = mh_memory("mem1");
	f[0] = mh_faulty("f0", mem[0], &fail_gets);
	f[1] = mh_faulty("f1", mem[1], NULL);
	mux = mh_mux("fo", &o, f, NULL, 2);
	MH_OK(mh_put(mem[0], "k", "v", &err), &err);
	MH_OK(mh_put(mem[1], "k", "v", &err), &err);
	MH_HOLDS(mux, "k", "v"); /* from f1, after f0 failed */
	st = smux_mux_stats(mux);
	assert_int_equal(st->backends[0].errors, 1);
	assert_int_equal(st->backends[1].errors, 0);
	smux_mux_stats_free(st);
	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(mem[i]);
	}
}

/* A source that fails with EIO after its first bytes (a staging file on a
 * failing local disk). */
static long eio_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	if (pos == 0 && arg)
		atomic_fetch_add((atomic_int *)arg, 1); /* a reader started */
	if (pos > 0)
		return -EIO;
	memset(dst, 'x', len < 4 ? len : 4);
	return len < 4 ? (long)len : 4;
}

static void test_source_eio_mirror(void **state)
{
	struct smux_error err;
	struct smux_source src;
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(mh_put(t.mux, "k", "old", &err), &err);
	smux_source_cb(&src, eio_read, NULL, 1000);
	LT_LOCAL(smux_backend_put(t.mux, &t.ctx, "k", &src, NULL, NULL, &err),
		 &err, EIO);
	LT_ALL_UP(t.mux);
	assert_int_equal(smux_mux_pending_hints(t.mux), 0);
	/* nothing half-written: both replicas keep the old content */
	MH_HOLDS(t.file[0], "k", "old");
	MH_HOLDS(t.file[1], "k", "old");
	MH_OK(mh_put(t.mux, "k", "new", &err), &err);
	MH_HOLDS(t.file[0], "k", "new");
	MH_HOLDS(t.file[1], "k", "new");
	lt_release(&t);
}

static void test_source_eio_failover(void **state)
{
	struct smux_error err;
	struct smux_source src;
	atomic_int readers = 0;
	struct lt t;
	uint64_t before;

	(void)state;
	lt_init(&t, SMUX_MODE_FAILOVER, 2);
	before = lt_calls(t.mux);
	smux_source_cb(&src, eio_read, &readers, 1000);
	LT_LOCAL(smux_backend_put(t.mux, &t.ctx, "k", &src, NULL, NULL, &err),
		 &err, EIO);
	/* no fall-through, and the member is charged nothing */
	assert_int_equal(atomic_load(&readers), 1);
	assert_int_equal(lt_calls(t.mux) - before, 0);
	LT_ALL_UP(t.mux);
	assert_int_equal(smux_mux_pending_hints(t.mux), 0);
	MH_LACKS(t.file[1], "k");
	lt_release(&t);
}

/* A source whose second reader fails with EIO past its first bytes (the
 * first reads it all): a local disk failing for one replica's copy. */
static long eio_second(void *arg, uint64_t pos, void *dst, size_t len)
{
	_Thread_local static int me;
	atomic_int *readers = arg;

	if (pos == 0)
		me = atomic_fetch_add(readers, 1) + 1;
	if (pos > 0 && me == 2)
		return -EIO;
	memset(dst, 'y', len);
	return (long)len;
}

/* One replica took the write, the other's copy of the source failed: not
 * acknowledged (the caller's EIO), no replica charged, and the replica
 * that missed it gets a hint so the two converge. */
static void test_source_eio_one_replica(void **state)
{
	struct smux_error err;
	struct smux_source src;
	atomic_int readers = 0;
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(mh_put(t.mux, "k", "old", &err), &err);
	smux_source_cb(&src, eio_second, &readers, 3 * (uint64_t)SMUX_IO_CHUNK);
	LT_LOCAL(smux_backend_put(t.mux, &t.ctx, "k", &src, NULL, NULL, &err),
		 &err, EIO);
	assert_int_equal(atomic_load(&readers), 2);
	LT_ALL_UP(t.mux);
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	lt_release(&t);
}

/* A full TMPDIR: a 64 KiB tmpfs under @t's directory, filled up (root in
 * CI: a real full filesystem, not a simulation). */
struct full_tmp {
	char dir[128];
	char *old; /* TMPDIR before, or NULL */
};

/* The tmpfs mounted now, for the teardown of a test that failed. */
static char mounted[128];

static int unmount_left(void **state)
{
	(void)state;
	if (mounted[0])
		umount2(mounted, MNT_DETACH);
	mounted[0] = '\0';
	return 0;
}

static void full_tmp_on(struct lt *t, struct full_tmp *ft)
{
	static char junk[256 * 1024];
	const char *old;
	char path[160];
	int fd;

	snprintf(ft->dir, sizeof(ft->dir), "%s/tmpfs", t->dir);
	assert_int_equal(mkdir(ft->dir, 0700), 0);
	assert_int_equal(mount("tmpfs", ft->dir, "tmpfs", 0, "size=64k"), 0);
	snprintf(mounted, sizeof(mounted), "%s", ft->dir);
	snprintf(path, sizeof(path), "%s/filler", ft->dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	close(fd);
	old = getenv("TMPDIR");
	ft->old = old ? strdup(old) : NULL;
	setenv("TMPDIR", ft->dir, 1);
}

static void full_tmp_off(struct full_tmp *ft)
{
	if (ft->old) {
		setenv("TMPDIR", ft->old, 1);
		free(ft->old);
	} else {
		unsetenv("TMPDIR");
	}
	assert_int_equal(umount2(ft->dir, MNT_DETACH), 0);
	mounted[0] = '\0';
}

/* A sticky copy between shards spools through a full TMPDIR: ENOSPC,
 * blaming no shard. */
static void test_tmpdir_full(void **state)
{
	static char big[256 * 1024];
	struct smux_error err;
	struct full_tmp ft = {0};
	char key[16];
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_STICKY, 2);
	memset(big, 'b', sizeof(big));
	MH_OK(smux_backend_put_buf(t.mux, &t.ctx, "src", big, sizeof(big),
				   &err),
	      &err);
	full_tmp_on(&t, &ft);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "dst%d", i);
		LT_LOCAL(smux_backend_copy(t.mux, &t.ctx, "src", key, &err),
			 &err, ENOSPC);
		LT_ALL_UP(t.mux);
	}
	full_tmp_off(&ft);
	MH_OK(smux_backend_copy(t.mux, &t.ctx, "src", "dst0", &err), &err);
	LT_ALL_UP(t.mux);
	lt_release(&t);
}

/* Status and consecutive failures of member @i of @mux. */
static void lt_member(struct smux_backend *mux, unsigned i,
		      enum smux_status *status, unsigned *failures,
		      uint64_t *errors)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);

	assert_true(i < st->n_backends);
	*status = st->backends[i].status;
	*failures = st->backends[i].consecutive_failures;
	*errors = st->backends[i].errors;
	smux_mux_stats_free(st);
}

/* A hint replayed through a full TMPDIR (the background repair can try it
 * every second): the replay fails, the replica it copies from is not
 * charged, the replica it repairs keeps its state, the hint stays; once
 * TMPDIR has room the replay succeeds. */
static void test_repair_tmpdir_full(void **state)
{
	struct smux_faulty_opts fail_puts = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	static char big[256 * 1024];
	struct smux_backend *f[2], *mux;
	unsigned replayed = 0, pending = 0, fails, fails1;
	enum smux_status st, st1;
	uint64_t errors, errors1;
	struct smux_error err;
	struct full_tmp ft = {0};
	struct mh_clock clk;
	struct lt t;

	(void)state;
	mh_clock_init(&clk, 10000);
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_MIRROR,
		.cooldown_ms = 100,
		.clock = &clk.clock,
	};
	lt_init(&t, SMUX_MODE_MIRROR, 2);
	f[0] = mh_faulty("f0", t.file[0], NULL);
	f[1] = mh_faulty("f1", t.file[1], NULL);
	mux = mh_mux("mr", &o, f, NULL, 2);
	memset(big, 'r', sizeof(big));
	smux_faulty_set(f[1], &fail_puts);
	MH_OK(smux_backend_put_buf(mux, &t.ctx, "k", big, sizeof(big), &err),
	      &err);
	mh_fail(f[1], false);
	assert_int_equal(smux_mux_pending_hints(mux), 1);
	lt_member(mux, 1, &st1, &fails1, &errors1);
	/* TMPDIR full first: once f1's cooldown is over, the mux's
	 * background thread may replay the hint too */
	full_tmp_on(&t, &ft);
	/* past f1's cooldown: a repair probes it with the replay */
	mh_clock_set(&clk, 10000 + 60000);
	for (int i = 0; i < 3; i++) {
		smux_mux_repair(mux, &t.ctx, &replayed, &pending, &err);
		assert_int_equal(replayed, 0);
		assert_int_equal(pending, 1);
		/* the source replica: up, charged nothing */
		lt_member(mux, 0, &st, &fails, &errors);
		assert_int_equal(st, SMUX_STATUS_UP);
		assert_int_equal(fails, 0);
		assert_int_equal(errors, 0);
		/* the replica being repaired: charged nothing. Its status
		 * is as it was, or up: past its cooldown the background
		 * thread's health probe (probe_due) may find it well first
		 * (TSan at load 10: 1 run in ~15 saw it up) */
		lt_member(mux, 1, &st, &fails, &errors);
		if (st != st1)
			assert_int_equal(st, SMUX_STATUS_UP);
		assert_true(fails <= fails1);
		assert_int_equal(errors, errors1);
	}
	full_tmp_off(&ft);
	/* the mux's background thread may replay it first: either way it
	 * is done now */
	MH_OK(smux_mux_repair(mux, &t.ctx, &replayed, &pending, &err), &err);
	assert_true(replayed <= 1);
	assert_int_equal(pending, 0);
	{
		struct smux_info info;

		MH_OK(smux_backend_head(t.file[1], &t.ctx, "k", &info, &err),
		      &err);
		assert_int_equal(info.size, sizeof(big));
	}
	smux_backend_unref(mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	lt_release(&t);
}

/* A failover writer keeps a spool under TMPDIR; on a full TMPDIR the
 * spool is dropped and the writer goes on on its member: the writes and
 * the commit succeed and no member is charged for the local disk. */
static void test_writer_spool_tmpdir_full(void **state)
{
	static char buf[256 * 1024];
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct full_tmp ft = {0};
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_FAILOVER, 2);
	MH_OK(mh_put(t.mux, "w", "old", &err), &err);
	full_tmp_on(&t, &ft);
	memset(buf, 'w', sizeof(buf));
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "w", 0, &w, &err), &err);
	for (int i = 0; i < 4; i++)
		MH_OK(smux_writer_pwrite(w, &t.ctx, buf, sizeof(buf),
					 (uint64_t)i * sizeof(buf), &err),
		      &err);
	MH_OK(smux_writer_commit(w, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	full_tmp_off(&ft);
	LT_ALL_UP(t.mux);
	{
		struct smux_info info;

		MH_OK(smux_backend_head(t.mux, &t.ctx, "w", &info, &err), &err);
		assert_int_equal(info.size, 4 * sizeof(buf));
	}
	lt_release(&t);
}

/* The spool's local disk fails when it is read back (EIO). */
static long spool_eio(int fd, void *buf, size_t len, uint64_t off)
{
	(void)fd;
	(void)buf;
	(void)len;
	(void)off;
	return -EIO;
}

/* A failover writer's member fails, the writer moves, and its spool
 * cannot be read back for the copy: the caller's EIO at once, without
 * opening writers on the members after (each would fail the same way),
 * no member charged for it. */
static void test_writer_spool_read_fails(void **state)
{
	struct smux_faulty_opts fail_writers = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *f[3], *mux;
	struct smux_writer *w = NULL;
	unsigned long calls2;
	enum smux_status st;
	unsigned fails;
	uint64_t errors;
	struct smux_error err;
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_FAILOVER, 3);
	for (unsigned i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "f%u", i);
		f[i] = mh_faulty(name, t.file[i], NULL);
	}
	mux = mh_mux("fw", &o, f, NULL, 3);
	MH_OK(smux_backend_writer_open(mux, &t.ctx, "w", SMUX_WRITER_TRUNC, &w,
				       &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &t.ctx, "spooled", 7, 0, &err), &err);
	smux_faulty_set(f[0], &fail_writers);
	smux__callerr_spool_pread_hook = spool_eio;
	calls2 = smux_faulty_calls(f[2]);
	LT_LOCAL(smux_writer_pwrite(w, &t.ctx, "more", 4, 7, &err), &err, EIO);
	smux__callerr_spool_pread_hook = NULL;
	/* no fall-through to f2 */
	assert_int_equal(smux_faulty_calls(f[2]), calls2);
	/* f1, which the spool could not be copied to, is not charged */
	lt_member(mux, 1, &st, &fails, &errors);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(fails, 0);
	smux_writer_close(w);
	smux_backend_unref(mux);
	for (unsigned i = 0; i < 3; i++)
		smux_backend_unref(f[i]);
	lt_release(&t);
}

/* truncate -s 999999999999999 f on a mirror of two file members: EFBIG,
 * semantic, both members up, and the next delete works. */
static void test_efbig_mirror(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct lt t;
	int rc;

	(void)state;
	lt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(mh_put(t.mux, "f", "data", &err), &err);
	for (int i = 0; i < 3; i++) {
		MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "f",
					       SMUX_WRITER_INPLACE, &w, &err),
		      &err);
		rc = smux_writer_truncate(w, &t.ctx, 999999999999999ULL, &err);
		assert_int_equal(rc, -EFBIG);
		assert_int_equal(err.e.sys_errno, EFBIG);
		assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_SEMANTIC);
		smux_writer_close(w);
		LT_HEALTHY(t.mux);
	}
	MH_HOLDS(t.file[0], "f", "data");
	MH_HOLDS(t.file[1], "f", "data");
	MH_OK(smux_backend_del(t.mux, &t.ctx, "f", &err), &err);
	MH_LACKS(t.file[0], "f");
	MH_LACKS(t.file[1], "f");
	LT_HEALTHY(t.mux);
	lt_release(&t);
}

/* The same refusal straight from the file backend: semantic, EFBIG. */
static void test_efbig_file(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct lt t;

	(void)state;
	lt_init(&t, SMUX_MODE_FAILOVER, 1);
	MH_OK(mh_put(t.file[0], "f", "data", &err), &err);
	MH_OK(smux_backend_writer_open(t.file[0], &t.ctx, "f",
				       SMUX_WRITER_INPLACE, &w, &err),
	      &err);
	assert_int_equal(
		smux_writer_truncate(w, &t.ctx, 999999999999999ULL, &err),
		-EFBIG);
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_SEMANTIC);
	smux_writer_close(w);
	lt_release(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sink_full_mirror),
		cmocka_unit_test(test_sink_full_failover),
		cmocka_unit_test(test_sink_full_round_robin),
		cmocka_unit_test(test_sink_full_sticky),
		cmocka_unit_test(test_sink_full_shield),
		cmocka_unit_test(test_sink_dev_full),
		cmocka_unit_test(test_sink_full_nested),
		cmocka_unit_test(test_backend_own_failure),
		cmocka_unit_test(test_source_eio_mirror),
		cmocka_unit_test(test_source_eio_failover),
		cmocka_unit_test(test_source_eio_one_replica),
		cmocka_unit_test_teardown(test_tmpdir_full, unmount_left),
		cmocka_unit_test_teardown(test_repair_tmpdir_full,
					  unmount_left),
		cmocka_unit_test_teardown(test_writer_spool_tmpdir_full,
					  unmount_left),
		cmocka_unit_test(test_writer_spool_read_fails),
		cmocka_unit_test(test_efbig_mirror),
		cmocka_unit_test(test_efbig_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
