// SPDX-License-Identifier: MIT
/*
 * test_error_sweep.c - the reachability sweep of seed section 2
 * (error-codes.test.ts: "every code triggered").
 *
 * Each test drives one error code out of a real code path (a backend, the
 * dispatch wrappers, the mux, its health checks, the hint journal) and
 * records it in a bitmap after checking the code, its class and its errno
 * (and the -errno the call returned). The last test fails unless every
 * code 1..SMUX_CODE_COUNT-1 was recorded or is listed, with its reason, in
 * not_reachable_yet[]; it also fails when a listed code was recorded (the
 * list is stale then). The listed codes still get their mapping helpers
 * and table rows exercised in test_not_reachable_yet_helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/http_client.h"
#include "mux_helpers.h"
#include "smux/file.h"
#include "smux/swift.h"
#include "support/swift_server.h"
#include "support/test_server.h"

/* NO_MEMORY asks for 2^62 bytes: under the sanitizers that must fail with
 * NULL too instead of aborting the run. */
const char *__asan_default_options(void);
const char *__tsan_default_options(void);

const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

const char *__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/*
 * Codes no code path of libsmux produces yet. Adding a backend or a path
 * that produces one means removing it here (the last test insists).
 */
static const enum smux_code not_reachable_yet[] = {
	/* Not a network code, but unreachable today: backend.c finish()
	 * maps an operation that failed without saying why through
	 * smux_error_from_errno(), whose default is IO_ERROR, and nothing
	 * sets UNKNOWN explicitly. It only names out-of-range codes
	 * (smux_code_name). */
	SMUX_E_UNKNOWN,
};

#define N_NOT_REACHABLE \
	(sizeof(not_reachable_yet) / sizeof(not_reachable_yet[0]))

_Static_assert(SMUX_CODE_COUNT <= 64, "the bitmap holds 64 codes");

static uint64_t triggered;		      /* bit per code */
static const char *scenario[SMUX_CODE_COUNT]; /* first trigger's path */

static bool was_triggered(enum smux_code code)
{
	return (triggered >> (unsigned)code) & 1;
}

static bool is_listed(enum smux_code code)
{
	for (size_t i = 0; i < N_NOT_REACHABLE; i++)
		if (not_reachable_yet[i] == code)
			return true;
	return false;
}

/* Checks @e (and @rc when @has_rc) against the expected code, class and
 * errno, then records the code. */
static void sweep_at(bool has_rc, long rc, const struct smux_error_info *e,
		     enum smux_code code, enum smux_class cls, int eno,
		     const char *how, const char *file, int line)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];
	struct smux_error whole = {.e = *e};

	if (e->code == code && smux_error_class(e) == cls &&
	    e->sys_errno == eno && (!has_rc || rc == -eno) && e->message[0]) {
		triggered |= UINT64_C(1) << (unsigned)code;
		if (!scenario[code])
			scenario[code] = how;
		return;
	}
	print_error("%s: want %s/%s/errno %d (%s), got %s/%s/errno %d rc %ld: "
		    "%s\n",
		    how, smux_code_name(code), smux_class_name(cls), eno,
		    strerror(eno), smux_code_name(e->code),
		    smux_class_name(smux_error_class(e)), e->sys_errno, rc,
		    smux_error_format(&whole, buf, sizeof(buf)));
	_fail(file, line);
}

/* A call's return value and error. */
#define SWEEP(rc, err, code, cls, eno, how)                                    \
	sweep_at(true, (long)(rc), &(err)->e, (code), SMUX_CLASS_##cls, (eno), \
		 (how), __FILE__, __LINE__)
/* An error that arrived without a return value (an event's cause). */
#define SWEEP_INFO(info, code, cls, eno, how)                              \
	sweep_at(false, 0, (info), (code), SMUX_CLASS_##cls, (eno), (how), \
		 __FILE__, __LINE__)

/* ---- a fake backend kind: every operation fails with a raw errno ---- */

/*
 * What a backend that forgets to fill its error looks like to the dispatch
 * wrappers: each operation returns `rc` and leaves @err untouched, so
 * finish() in backend.c maps the errno. No writer_open (NOT_SUPPORTED).
 */
struct raw_backend {
	struct smux_backend base; /* first, for the downcast */
	int rc;
};

static int raw_rc(const struct smux_backend *b)
{
	return ((const struct raw_backend *)b)->rc;
}

static int raw_get(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_get_opts *opts,
		   struct smux_sink *sink, struct smux_info *info,
		   struct smux_error *err)
{
	return raw_rc(b);
}

static int raw_put(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_source *src,
		   const struct smux_put_opts *opts, struct smux_info *info,
		   struct smux_error *err)
{
	return raw_rc(b);
}

static int raw_del(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, struct smux_error *err)
{
	return raw_rc(b);
}

static int raw_head(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_info *info,
		    struct smux_error *err)
{
	return raw_rc(b);
}

static int raw_list(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *prefix, const char *delimiter, smux_list_fn fn,
		    void *arg, struct smux_error *err)
{
	return raw_rc(b);
}

static void raw_destroy(struct smux_backend *b)
{
	smux_backend_release(b);
	free(b);
}

static const struct smux_backend_ops raw_ops = {
	.kind = "raw",
	.get = raw_get,
	.put = raw_put,
	.del = raw_del,
	.head = raw_head,
	.list = raw_list,
	.destroy = raw_destroy,
};

static struct smux_backend *raw_new(const char *name, int rc)
{
	struct raw_backend *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	assert_int_equal(smux_backend_init(&r->base, &raw_ops, name), 0);
	r->rc = rc;
	return &r->base;
}

/* ---- a temporary directory for file backends (and the tmpfs) ---- */

struct fs_env {
	char base[64];		/* mkdtemp directory, the file backend root */
	bool mounted;		/* a 64 KiB tmpfs is mounted on base */
	int mount_errno;	/* why it is not */
	struct smux_backend *b; /* a file backend on base */
};

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static struct fs_env *fs_env_new(void)
{
	struct fs_env *env = calloc(1, sizeof(*env));

	if (!env)
		return NULL;
	snprintf(env->base, sizeof(env->base), "/tmp/smux-error-sweep.XXXXXX");
	if (!mkdtemp(env->base)) {
		free(env);
		return NULL;
	}
	return env;
}

static void fs_env_open(struct fs_env *env)
{
	struct smux_file_opts opts = {.path = env->base, .no_fsync = true};
	struct smux_error err;

	MH_OK(smux_file_new("file", &opts, &env->b, &err), &err);
}

static int setup_fs(void **state)
{
	struct fs_env *env = fs_env_new();

	*state = env;
	return env ? 0 : -1;
}

/* A 64 KiB tmpfs on the directory when we may mount (root); otherwise
 * the test falls back to a sink on /dev/full. */
static int setup_tmpfs(void **state)
{
	struct fs_env *env = fs_env_new();

	*state = env;
	if (!env)
		return -1;
	env->mounted = mount("tmpfs", env->base, "tmpfs", 0,
			     "size=64k,mode=0700") == 0;
	env->mount_errno = env->mounted ? 0 : errno;
	return 0;
}

/* Always unmounts what setup mounted, even after a failed test. */
static int teardown_fs(void **state)
{
	struct fs_env *env = *state;
	int rc = 0;

	if (!env)
		return 0;
	smux_backend_unref(env->b);
	if (env->mounted && umount2(env->base, MNT_DETACH) != 0) {
		print_error("umount2 %s: %s\n", env->base, strerror(errno));
		rc = -1;
	}
	nftw(env->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(env);
	return rc;
}

/* Asserts @b holds @key with content @want (MH_HOLDS without the double
 * free the analyzers see in it, as they do not know _fail never
 * returns). */
static void expect_holds(struct smux_backend *b, const char *key,
			 const char *want)
{
	struct smux_error err;
	int rc;
	char *got = mh_get(b, key, &rc, &err);

	MH_OK(rc, &err);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void wait_not_hanging(struct smux_backend *fb)
{
	for (int i = 0; i < 2000 && smux_faulty_hanging(fb); i++)
		usleep(1000);
	assert_int_equal(smux_faulty_hanging(fb), 0);
}

/* ---- STORAGE.*: what a single backend reports ---- */

static void test_key_not_found(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;
	int rc;

	(void)state;
	assert_null(mh_get(mem, "missing", &rc, &err));
	SWEEP(rc, &err, SMUX_E_KEY_NOT_FOUND, SEMANTIC, ENOENT,
	      "memory get of an absent key");
	smux_backend_unref(mem);
}

static void test_invalid_key(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;
	int rc;

	(void)state;
	assert_null(mh_get(mem, "../x", &rc, &err));
	SWEEP(rc, &err, SMUX_E_INVALID_KEY, SEMANTIC, EINVAL,
	      "get \"../x\" (key check in the wrapper)");
	smux_backend_unref(mem);
}

static void test_key_too_long(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;
	char key[301];
	int rc;

	(void)state;
	memset(key, 'a', 300);
	key[300] = '\0';
	assert_null(mh_get(mem, key, &rc, &err));
	SWEEP(rc, &err, SMUX_E_KEY_TOO_LONG, SEMANTIC, ENAMETOOLONG,
	      "get of a 300-byte segment");
	smux_backend_unref(mem);
}

static void test_permission_denied(void **state)
{
	struct fs_env *env = *state;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	char path[128];
	int rc;

	smux_ctx_init(&ctx);
	fs_env_open(env);
	snprintf(path, sizeof(path), "%s/link", env->base);
	assert_int_equal(symlink("/etc", path), 0);
	/* the link itself is an object; a path through it is refused */
	rc = smux_backend_head(env->b, &ctx, "link/passwd", &info, &err);
	SWEEP(rc, &err, SMUX_E_PERMISSION_DENIED, SEMANTIC, EACCES,
	      "file head through a symlink planted in the root");
}

static void test_not_empty(void **state)
{
	struct fs_env *env = *state;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	smux_ctx_init(&ctx);
	fs_env_open(env);
	MH_OK(mh_put(env->b, "d/x", "child", &err), &err);
	rc = smux_backend_del(env->b, &ctx, "d/", &err);
	SWEEP(rc, &err, SMUX_E_NOT_EMPTY, SEMANTIC, ENOTEMPTY,
	      "file del \"d/\" with a child");
	expect_holds(env->b, "d/x", "child");
}

static void test_is_directory(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;
	int rc;

	(void)state;
	MH_OK(mh_put(mem, "d/", "", &err), &err);
	assert_null(mh_get(mem, "d/", &rc, &err));
	SWEEP(rc, &err, SMUX_E_IS_DIRECTORY, SEMANTIC, EISDIR,
	      "memory get of the marker \"d/\"");
	smux_backend_unref(mem);
}

static void test_not_directory(void **state)
{
	struct fs_env *env = *state;
	struct smux_error err;
	int rc;

	fs_env_open(env);
	MH_OK(mh_put(env->b, "f", "file", &err), &err);
	rc = mh_put(env->b, "f/x", "under a file", &err);
	SWEEP(rc, &err, SMUX_E_NOT_DIRECTORY, SEMANTIC, ENOTDIR,
	      "file put \"f/x\" where f is a file");
	expect_holds(env->b, "f", "file");
}

static void test_no_attr(void **state)
{
	struct fs_env *env = *state;
	struct smux_error err;
	struct smux_ctx ctx;
	char buf[16];
	size_t n = 1;
	int rc;

	fs_env_open(env);
	smux_ctx_init(&ctx);
	MH_OK(mh_put(env->b, "f", "file", &err), &err);
	rc = smux_backend_getxattr(env->b, &ctx, "f", "user.none", buf,
				   sizeof(buf), &n, &err);
	SWEEP(rc, &err, SMUX_E_NO_ATTR, SEMANTIC, ENODATA,
	      "file getxattr of an attribute \"f\" does not have");
	assert_int_equal(n, 0);
	rc = smux_backend_removexattr(env->b, &ctx, "f", "user.none", &err);
	SWEEP(rc, &err, SMUX_E_NO_ATTR, SEMANTIC, ENODATA,
	      "file removexattr of an attribute \"f\" does not have");
}

/*
 * No shipped backend reports EEXIST: the file backend's mkdir -p treats
 * it as "already there" and its O_EXCL temp names retry on a collision.
 * What remains is the dispatch wrapper's mapping of a raw errno (finish()
 * -> smux_error_from_errno), driven here through smux_backend_put on a
 * backend kind that returns -EEXIST without filling its error.
 */
static void test_already_exists(void **state)
{
	struct smux_backend *raw = raw_new("raw", -EEXIST);
	struct smux_error err;
	int rc;

	(void)state;
	rc = mh_put(raw, "k", "v", &err);
	SWEEP(rc, &err, SMUX_E_ALREADY_EXISTS, SEMANTIC, EEXIST,
	      "raw -EEXIST mapped by the put wrapper (no backend emits it)");
	assert_string_equal(err.e.backend, "raw");
	assert_int_equal(err.e.attempts, 1);
	smux_backend_unref(raw);
}

static void test_precondition_failed(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_get_opts opts = {
		.length = SMUX_LEN_ALL,
		.if_match = "stale-etag",
	};
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	smux_sink_dyn(&sink);
	rc = smux_backend_get(mem, &ctx, "k", &opts, &sink, NULL, &err);
	assert_int_equal(sink.written, 0);
	smux_sink_release(&sink);
	SWEEP(rc, &err, SMUX_E_PRECONDITION_FAILED, SEMANTIC, ESTALE,
	      "memory get with a stale if_match");
	smux_backend_unref(mem);
}

static int count_entry(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 0;
}

static void test_not_supported(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_backend *raw = raw_new("raw", -EIO);
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned n = 0;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	rc = smux_backend_list(mem, &ctx, "", "|", count_entry, &n, &err);
	SWEEP(rc, &err, SMUX_E_NOT_SUPPORTED, SEMANTIC, ENOTSUP,
	      "list with delimiter \"|\"");
	assert_int_equal(n, 0);
	rc = smux_backend_writer_open(raw, &ctx, "k", 0, &w, &err);
	SWEEP(rc, &err, SMUX_E_NOT_SUPPORTED, SEMANTIC, ENOTSUP,
	      "writer_open on a kind without a writer");
	assert_null(w);
	smux_backend_unref(raw);
	smux_backend_unref(mem);
}

static void test_invalid_argument(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;
	int rc;

	(void)state;
	rc = mh_put(mem, "d/", "data", &err);
	SWEEP(rc, &err, SMUX_E_INVALID_ARGUMENT, SEMANTIC, EINVAL,
	      "put of a marker with data");
	assert_int_equal(smux_memory_count(mem), 0);
	smux_backend_unref(mem);
}

#define BIG ((size_t)1 << 20)

static void test_no_space(void **state)
{
	struct fs_env *env = *state;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	smux_ctx_init(&ctx);
	fs_env_open(env);
	if (env->mounted) {
		unsigned char *buf = calloc(1, BIG);

		assert_non_null(buf);
		rc = smux_backend_put_buf(env->b, &ctx, "big", buf, BIG, &err);
		free(buf);
		SWEEP(rc, &err, SMUX_E_NO_SPACE, TRANSIENT, ENOSPC,
		      "file put of 1 MiB into a 64 KiB tmpfs");
		MH_LACKS(env->b, "big"); /* the temp file is gone too */
	} else {
		/* Not allowed to mount (not root, or no CAP_SYS_ADMIN): a
		 * backend whose put fails with a bare ENOSPC. (A sink on
		 * /dev/full is the caller's ENOSPC: LOCAL_IO_ERROR.) */
		struct smux_backend *raw = raw_new("raw", -ENOSPC);

		print_message("  (no tmpfs: %s; NO_SPACE from a bare errno)\n",
			      strerror(env->mount_errno));
		rc = smux_backend_put_buf(raw, &ctx, "k", "x", 1, &err);
		smux_backend_unref(raw);
		SWEEP(rc, &err, SMUX_E_NO_SPACE, TRANSIENT, ENOSPC,
		      "put on a backend failing with ENOSPC");
	}
}

/*
 * The caller's own sink or source fails (a full cache directory, a
 * staging file with EIO): LOCAL_IO_ERROR with the local errno, through a
 * mirror whose members stay up and are charged nothing.
 */
static long eio_source(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)arg;
	(void)pos;
	(void)dst;
	(void)len;
	return -EIO;
}

static void test_local_io(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *mem[2] = {mh_memory("m0"), mh_memory("m1")};
	struct smux_backend *mux = mh_mux("mx", &o, mem, NULL, 2);
	struct smux_mux_stats *st;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;
	int fd, rc;

	(void)state;
	smux_ctx_init(&ctx);
	MH_OK(mh_put(mux, "k", "some bytes", &err), &err);
	fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	smux_sink_fd(&sink, fd, 0);
	rc = smux_backend_get(mux, &ctx, "k", NULL, &sink, NULL, &err);
	close(fd);
	SWEEP(rc, &err, SMUX_E_LOCAL_IO, LOCAL, ENOSPC,
	      "mirror get into a sink on /dev/full");
	smux_source_cb(&src, eio_source, NULL, 10);
	rc = smux_backend_put(mux, &ctx, "k", &src, NULL, NULL, &err);
	SWEEP(rc, &err, SMUX_E_LOCAL_IO, LOCAL, EIO,
	      "mirror put from a source failing with EIO");
	st = smux_mux_stats(mux);
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(st->backends[i].status, SMUX_STATUS_UP);
		assert_int_equal(st->backends[i].errors, 0);
	}
	smux_mux_stats_free(st);
	MH_HOLDS(mux, "k", "some bytes");
	smux_backend_unref(mux);
	smux_backend_unref(mem[0]);
	smux_backend_unref(mem[1]);
}

/* Never called: the allocation of 2^62 bytes fails first. */
static long never_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)arg;
	(void)pos;
	(void)dst;
	(void)len;
	return -EIO;
}

static void test_no_memory(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	smux_source_cb(&src, never_read, NULL, UINT64_C(1) << 62);
	rc = smux_backend_put(mem, &ctx, "huge", &src, NULL, NULL, &err);
	SWEEP(rc, &err, SMUX_E_NO_MEMORY, TRANSIENT, ENOMEM,
	      "memory put of a source declaring 2^62 bytes");
	assert_int_equal(smux_memory_count(mem), 0);
	smux_backend_unref(mem);
}

static void test_io_error(void **state)
{
	struct smux_faulty_opts o = {.error_rate = 1.0};
	struct smux_backend *mem = mh_memory("mem");
	struct smux_backend *f = mh_faulty("faulty", mem, &o);
	struct smux_error err;
	int rc;

	(void)state;
	assert_null(mh_get(f, "k", &rc, &err));
	SWEEP(rc, &err, SMUX_E_IO, TRANSIENT, EIO, "faulty error_rate=1");
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

static void test_connection_failed(void **state)
{
	struct smux_faulty_opts o = {.timeout_rate = 1.0};
	struct smux_backend *mem = mh_memory("mem");
	struct smux_backend *f = mh_faulty("faulty", mem, &o);
	struct smux_error err;
	int rc;

	(void)state;
	assert_null(mh_get(f, "k", &rc, &err));
	SWEEP(rc, &err, SMUX_E_CONNECTION, TRANSIENT, ETIMEDOUT,
	      "faulty timeout_rate=1");
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

/* ---- STORAGE_MUX.*: what the multiplexer reports ---- */

static void test_all_backends_down(void **state)
{
	struct smux_faulty_opts o = {.error_rate = 1.0};
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2], *mux;
	struct smux_error err;
	int rc;

	(void)state;
	f[0] = mh_faulty("f0", mem, &o);
	f[1] = mh_faulty("f1", mem, &o);
	mux = mh_mux("fo", &mo, f, NULL, 2);
	assert_null(mh_get(mux, "k", &rc, &err));
	SWEEP(rc, &err, SMUX_E_ALL_BACKENDS_DOWN, TRANSIENT, EIO,
	      "failover mux over two failing members");
	assert_int_equal(err.e.attempts, 2);
	assert_true(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_E_IO);
	smux_backend_unref(mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
}

static void test_backend_timeout(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1.0,
		.hang_ignores_cancel = true,
	};
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 100,
	};
	struct smux_backend *mem = mh_memory("mem"), *f, *mux;
	struct smux_error err;
	int rc;

	(void)state;
	f = mh_faulty("stuck", mem, &hang);
	mux = mh_mux("to", &mo, &f, NULL, 1);
	assert_null(mh_get(mux, "k", &rc, &err));
	/* release the stuck call first, so a failed check cannot leave it */
	smux_backend_unref(mux);
	smux_faulty_release_hangs(f);
	wait_not_hanging(f);
	smux_backend_unref(f);
	smux_backend_unref(mem);
	SWEEP(rc, &err, SMUX_E_BACKEND_TIMEOUT, TRANSIENT, ETIMEDOUT,
	      "100 ms bulkhead over a hang that ignores cancel");
}

/* A get on a failover mux over a memory backend, with a token fired for
 * @why in its context. */
static int get_cancelled(enum smux_cancel_reason why, struct smux_error *err)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *mux;
	struct smux_cancel token;
	struct smux_sink sink;
	struct smux_ctx ctx;
	int rc;

	MH_OK(mh_put(mem, "k", "v", err), err);
	mux = mh_mux("cx", &mo, &mem, NULL, 1);
	smux_cancel_init(&token);
	smux_cancel_fire(&token, why);
	smux_ctx_init(&ctx);
	ctx.cancel[0] = &token;
	smux_sink_dyn(&sink);
	rc = smux_backend_get(mux, &ctx, "k", NULL, &sink, NULL, err);
	assert_int_equal(sink.written, 0);
	smux_sink_release(&sink);
	smux_cancel_release(&token);
	smux_backend_unref(mux);
	smux_backend_unref(mem);
	return rc;
}

static void test_backend_aborted(void **state)
{
	struct smux_error err;
	int rc;

	(void)state;
	rc = get_cancelled(SMUX_CANCEL_ABORT, &err);
	SWEEP(rc, &err, SMUX_E_BACKEND_ABORTED, ABORT, EINTR,
	      "mux get with a token fired SMUX_CANCEL_ABORT");
}

static void test_backend_draining(void **state)
{
	struct smux_error err;
	int rc;

	(void)state;
	rc = get_cancelled(SMUX_CANCEL_DRAIN, &err);
	SWEEP(rc, &err, SMUX_E_BACKEND_DRAINING, TRANSIENT, EAGAIN,
	      "mux get with a token fired SMUX_CANCEL_DRAIN");
}

/* A write to a fan-out mux over a healthy "a" and a failing "b". */
static void fanout_put(const struct smux_mux_opts *mo, struct smux_error *err,
		       int *rc)
{
	struct smux_faulty_opts fail = {.error_rate = 1.0};
	struct smux_backend *mem[2], *bs[2], *mux;

	mem[0] = mh_memory("mem-a");
	mem[1] = mh_memory("mem-b");
	bs[0] = mh_faulty("a", mem[0], NULL);
	bs[1] = mh_faulty("b", mem[1], &fail);
	mux = mh_mux("fan", mo, bs, NULL, 2);
	*rc = mh_put(mux, "k", "v", err);
	expect_holds(mem[0], "k", "v");
	MH_LACKS(mem[1], "k");
	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(bs[i]);
		smux_backend_unref(mem[i]);
	}
}

static void test_write_fanout_partial(void **state)
{
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_SHIELD,
		.throw_on_fanout_partial = true,
	};
	struct smux_error err;
	int rc;

	(void)state;
	fanout_put(&mo, &err, &rc);
	SWEEP(rc, &err, SMUX_E_WRITE_FANOUT_PARTIAL, TRANSIENT, EIO,
	      "shield, throw_on_fanout_partial, failing mirror");
	assert_true(err.has_cause);
	assert_string_equal(err.cause.backend, "b");
}

static void test_write_quorum_failed(void **state)
{
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_MIRROR,
		.write_quorum = 2,
	};
	struct smux_error err;
	int rc;

	(void)state;
	fanout_put(&mo, &err, &rc);
	SWEEP(rc, &err, SMUX_E_WRITE_QUORUM_FAILED, TRANSIENT, EIO,
	      "mirror write_quorum 2 of 2, one failing");
	assert_true(err.has_cause);
	assert_string_equal(err.cause.backend, "b");
}

static void test_invalid_weight(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_WEIGHTED};
	struct smux_backend *mem = mh_memory("a"), *mux;
	const double w = 1.0;
	struct smux_error err;
	int rc;

	(void)state;
	mux = mh_mux("w", &mo, &mem, &w, 1);
	rc = smux_mux_set_weight(mux, "a", -1.0, &err);
	SWEEP(rc, &err, SMUX_E_INVALID_WEIGHT, SEMANTIC, EINVAL,
	      "smux_mux_set_weight -1");
	smux_backend_unref(mux);
	smux_backend_unref(mem);
}

static void test_weighted_requires_weights(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_WEIGHTED};
	struct smux_backend *mem = mh_memory("a"), *mux = NULL;
	struct smux_mux_member m = {.backend = mem};
	struct smux_error err;
	int rc;

	(void)state;
	rc = smux_mux_new("w", &mo, &m, 1, &mux, &err);
	SWEEP(rc, &err, SMUX_E_WEIGHTED_REQUIRES_WEIGHTS, SEMANTIC, EINVAL,
	      "weighted mux without weights");
	assert_null(mux);
	smux_backend_unref(mem);
}

static void test_backend_name_conflict(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *a = mh_memory("a"), *twin = mh_memory("a"), *mux;
	struct smux_mux_member m = {.backend = twin};
	struct smux_error err;
	int rc;

	(void)state;
	mux = mh_mux("nc", &mo, &a, NULL, 1);
	rc = smux_mux_add(mux, &m, &err);
	SWEEP(rc, &err, SMUX_E_BACKEND_NAME_CONFLICT, SEMANTIC, EEXIST,
	      "smux_mux_add of an existing name");
	smux_backend_unref(mux);
	smux_backend_unref(twin);
	smux_backend_unref(a);
}

static void test_backend_not_found(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *a = mh_memory("a"), *mux;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	mux = mh_mux("nf", &mo, &a, NULL, 1);
	rc = smux_mux_drain(mux, "nope", &ctx, &err);
	SWEEP(rc, &err, SMUX_E_BACKEND_NOT_FOUND, SEMANTIC, ENOENT,
	      "smux_mux_drain of an unknown name");
	smux_backend_unref(mux);
	smux_backend_unref(a);
}

static void test_recursion_depth_exceeded(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *level[SMUX_MAX_DEPTH + 1], *ninth = NULL;
	struct smux_mux_member m = {0};
	struct smux_error err;
	char name[16];
	int rc;

	(void)state;
	level[0] = mh_memory("leaf");
	for (int i = 1; i <= SMUX_MAX_DEPTH; i++) { /* 8 muxes: allowed */
		snprintf(name, sizeof(name), "mux%d", i);
		level[i] = mh_mux(name, &mo, &level[i - 1], NULL, 1);
		assert_int_equal(level[i]->depth, i);
	}
	m.backend = level[SMUX_MAX_DEPTH];
	rc = smux_mux_new("mux9", &mo, &m, 1, &ninth, &err);
	SWEEP(rc, &err, SMUX_E_RECURSION_DEPTH_EXCEEDED, SEMANTIC, ELOOP,
	      "nesting 9 muxes");
	assert_null(ninth);
	for (int i = SMUX_MAX_DEPTH; i >= 0; i--)
		smux_backend_unref(level[i]);
}

static void test_healthcheck_failed(void **state)
{
	struct smux_faulty_opts hc_fails = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_HEALTHCHECK,
	};
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_event down = {0};

	(void)state;
	mo.events = ev->bus;
	f[0] = mh_faulty("sick", mem, &hc_fails);
	f[1] = mh_faulty("well", mem, NULL);
	mux = mh_mux("hc", &mo, f, NULL, 2);
	smux_mux_check_health(mux);
	smux_events_flush(ev->bus);
	assert_true(mh_events_last(ev, SMUX_EV_BACKEND_DOWN, &down));
	assert_string_equal(down.name, "sick");
	assert_true(down.has_cause);
	SWEEP_INFO(&down.cause, SMUX_E_HEALTHCHECK_FAILED, TRANSIENT, EIO,
		   "backend.down cause after smux_mux_check_health");
	smux_backend_unref(mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

static void test_mirror_origin_required(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_SHIELD};
	struct smux_backend *mux = NULL;
	struct smux_error err;
	int rc;

	(void)state;
	rc = smux_mux_new("shield", &mo, NULL, 0, &mux, &err);
	SWEEP(rc, &err, SMUX_E_MIRROR_ORIGIN_REQUIRED, SEMANTIC, EINVAL,
	      "shield mux with 0 members");
	assert_null(mux);
}

static void test_invalid_options(void **state)
{
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *a = mh_memory("a"), *mux = NULL;
	struct smux_mux_member m = {.backend = a};
	struct smux_error err;
	int rc;

	(void)state;
	rc = smux_mux_new("", &mo, &m, 1, &mux, &err);
	SWEEP(rc, &err, SMUX_E_INVALID_OPTIONS, SEMANTIC, EINVAL,
	      "mux with an empty name");
	assert_null(mux);
	smux_backend_unref(a);
}

static void test_hint_journal_failed(void **state)
{
	struct fs_env *env = *state;
	struct smux_mux_opts mo = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *a = mh_memory("a"), *mux = NULL;
	struct smux_mux_member m = {.backend = a};
	char file[128], state_dir[160];
	struct smux_error err;
	int fd, rc;

	snprintf(file, sizeof(file), "%s/plain-file", env->base);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(state_dir, sizeof(state_dir), "%s/state", file);
	mo.state_dir = state_dir;
	rc = smux_mux_new("m", &mo, &m, 1, &mux, &err);
	SWEEP(rc, &err, SMUX_E_HINT_JOURNAL_FAILED, TRANSIENT, EIO,
	      "mirror with state_dir under a regular file");
	assert_non_null(strstr(err.e.message, strerror(ENOTDIR)));
	assert_null(mux);
	smux_backend_unref(a);
}

/* ---- the HTTP layer's codes (src/backends/http_client.c), against the
 * scripted server of tests/servers/http_script.py ---- */

struct http_env {
	struct ts_server server;
	char dir[64];
	char base[64];
};

static int setup_http(void **state)
{
	struct http_env *h = calloc(1, sizeof(*h));

	if (!h)
		return -1;
	snprintf(h->dir, sizeof(h->dir), "/tmp/smux-sweep-http-XXXXXX");
	if (!mkdtemp(h->dir)) {
		free(h);
		return -1;
	}
	*state = h;
	if (ts_script_server_start(&h->server, h->dir) < 0) {
		fprintf(stderr, "*** the HTTP codes need python3 and "
				"tests/servers/http_script.py ***\n");
		return -1;
	}
	snprintf(h->base, sizeof(h->base), "http://127.0.0.1:%d",
		 h->server.port);
	return 0;
}

static int teardown_http(void **state)
{
	struct http_env *h = *state;
	char port[96];

	ts_server_stop(&h->server);
	snprintf(port, sizeof(port), "%s/port", h->dir);
	unlink(port);
	rmdir(h->dir);
	free(h);
	return 0;
}

static int http_get(struct http_env *h, const char *user, const char *pass,
		    const char *path, struct smux_error *err)
{
	struct smux__http_opts o = {.backend = "web",
				    .max_attempts = 1,
				    .username = user,
				    .password = pass};
	struct smux__http_req req = {.method = "GET", .what = path};
	struct smux__http_resp resp;
	struct smux__http *c;
	struct smux_ctx ctx;
	char url[160];
	int rc;

	assert_int_equal(smux__http_new(&o, &c, err), 0);
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	req.url = url;
	smux_ctx_init(&ctx);
	rc = smux__http_do(c, &ctx, &req, &resp, err);
	smux__http_free(c);
	return rc;
}

static void test_http_codes(void **state)
{
	struct http_env *h = *state;
	struct smux_error err;
	int rc;

	/* a status without a code of its own: HTTP_ERROR, status kept;
	 * a 4xx is final */
	rc = http_get(h, NULL, NULL, "/always/418", &err);
	SWEEP(rc, &err, SMUX_E_HTTP, SEMANTIC, EINVAL, "HTTP 418 answer");
	assert_int_equal(err.e.http_status, 418);
	/* an answer that is not HTTP at all */
	rc = http_get(h, NULL, NULL, "/garbage", &err);
	SWEEP(rc, &err, SMUX_E_BAD_RESPONSE, TRANSIENT, EIO,
	      "garbage instead of an HTTP answer");
	/* credentials sent and refused */
	rc = http_get(h, "user", "wrong", "/auth", &err);
	SWEEP(rc, &err, SMUX_E_CREDENTIAL_EXPIRED, SEMANTIC, EACCES,
	      "HTTP 401 to the credentials sent");
	assert_int_equal(err.cause.http_status, 401);
}

/* CREDENTIAL_EXPIRED from a CDN backend: a swift backend whose token was
 * revoked and whose renewal the identity service (the v2.0 emulator,
 * tests/servers/swift_identity.py, alone) refuses. */
static void test_swift_credential_expired(void **state)
{
	struct smux_swift_opts o = {.auth = SMUX_SWIFT_AUTH_V2,
				    .username = TS_SWIFT_V2_USER,
				    .key = TS_SWIFT_V2_APIKEY,
				    .container = "c"};
	struct smux_backend *b = NULL;
	struct smux_error err;
	struct ts_swift srv;
	struct smux_ctx ctx;
	int rc;

	(void)state;
	assert_int_equal(ts_swift_identity_alone(&srv), 0);
	o.auth_url = srv.identity;
	smux_ctx_init(&ctx);
	assert_int_equal(smux_swift_new("cdn", &o, &b, &err), 0);
	assert_int_equal(smux_backend_healthcheck(b, &ctx, &err), 0);
	assert_int_equal(ts_swift_control("{\"revoke\":true,"
					  "\"refuse_auth\":true}",
					  NULL, 0),
			 0);
	rc = smux_backend_healthcheck(b, &ctx, &err);
	SWEEP(rc, &err, SMUX_E_CREDENTIAL_EXPIRED, SEMANTIC, EACCES,
	      "swift: token revoked, renewal refused by the identity service");
	assert_int_equal(err.cause.http_status, 401);
	assert_int_equal(ts_swift_control("{\"refuse_auth\":false}", NULL, 0),
			 0);
	smux_backend_unref(b);
}

/* ---- the codes listed as not reachable yet ---- */

/*
 * Nothing here is recorded: the mapping helpers and table rows checked
 * directly (the HTTP codes are also reached for real by test_http_codes;
 * UNKNOWN is still listed as not reachable).
 */
static void test_not_reachable_yet_helpers(void **state)
{
	struct smux_backend *raw = raw_new("raw", -EPROTO);
	struct smux_error err;
	int rc;

	(void)state;
	/* HTTP: a 5xx without its own code, transient and retried */
	rc = smux_error_from_http(&err, 503, "cdn", "GET k");
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(err.e.code, SMUX_E_HTTP);
	assert_int_equal(err.e.http_status, 503);
	assert_int_equal(err.e.sys_errno, EAGAIN);
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);
	/* a 4xx without its own code is final; 429 is not */
	rc = smux_error_from_http(&err, 400, "cdn", "GET k");
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(err.e.code, SMUX_E_HTTP);
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_SEMANTIC);
	rc = smux_error_from_http(&err, 429, "cdn", "GET k");
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);

	/* BAD_RESPONSE: no mapping helper, the backend sets it */
	rc = smux_error_set(&err, SMUX_E_BAD_RESPONSE, "s3",
			    "truncated ListObjectsV2 XML");
	assert_int_equal(rc, -EIO);
	assert_string_equal(smux_code_name(err.e.code), "STORAGE.BAD_RESPONSE");
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);

	/* CREDENTIAL_EXPIRED: a CDN backend wraps the 403 it got */
	smux_error_from_http(&err, 403, "cdn", "GET k");
	assert_int_equal(err.e.code, SMUX_E_PERMISSION_DENIED);
	rc = smux_error_wrap(&err, SMUX_E_CREDENTIAL_EXPIRED, "cdn",
			     "signed URL expired");
	assert_int_equal(rc, -EACCES);
	assert_string_equal(smux_code_name(err.e.code),
			    "STORAGE_CDN.CREDENTIAL_EXPIRED");
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_SEMANTIC);
	assert_true(err.has_cause);
	assert_int_equal(err.cause.http_status, 403);

	/* UNKNOWN: an errno the mapping does not know comes out as
	 * IO_ERROR, not UNKNOWN (backend.c finish() -> from_errno). If
	 * finish() starts reporting UNKNOWN, record it instead and drop
	 * it from not_reachable_yet. */
	rc = mh_put(raw, "k", "v", &err);
	assert_int_equal(rc, -EPROTO);
	assert_int_equal(err.e.code, SMUX_E_IO);
	assert_int_equal(err.e.sys_errno, EPROTO);
	assert_string_equal(smux_code_name((enum smux_code)999),
			    "STORAGE.UNKNOWN");
	assert_int_equal(smux_code_class(SMUX_E_UNKNOWN), SMUX_CLASS_TRANSIENT);
	assert_int_equal(smux_code_errno(SMUX_E_UNKNOWN), EIO);
	smux_backend_unref(raw);
}

/* ---- the sweep itself: runs last ---- */

static void test_every_code_triggered(void **state)
{
	unsigned missing = 0, stale = 0, n_hit = 0;

	(void)state;
	for (size_t i = 0; i < N_NOT_REACHABLE; i++) {
		enum smux_code c = not_reachable_yet[i];

		assert_true(c > SMUX_OK && c < SMUX_CODE_COUNT);
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(not_reachable_yet[j], c);
	}
	print_message("  triggered through a real code path:\n");
	for (unsigned c = 1; c < SMUX_CODE_COUNT; c++) {
		/* every name string maps back to its code */
		assert_int_equal(smux_code_from_name(smux_code_name(c)), c);
		if (!was_triggered(c))
			continue;
		n_hit++;
		print_message("    %-40s %s\n", smux_code_name(c), scenario[c]);
	}
	print_message("  listed as not reachable yet:\n");
	for (size_t i = 0; i < N_NOT_REACHABLE; i++) {
		enum smux_code c = not_reachable_yet[i];

		print_message("    %s\n", smux_code_name(c));
		if (was_triggered(c)) {
			print_error("%s is listed as not reachable but was "
				    "triggered: remove it from the list\n",
				    smux_code_name(c));
			stale++;
		}
	}
	for (unsigned c = 1; c < SMUX_CODE_COUNT; c++) {
		if (was_triggered(c) || is_listed(c))
			continue;
		print_error("%s was neither triggered nor listed as not "
			    "reachable\n",
			    smux_code_name(c));
		missing++;
	}
	print_message("  %u of %u codes triggered, %zu listed\n", n_hit,
		      SMUX_CODE_COUNT - 1, N_NOT_REACHABLE);
	assert_int_equal(missing, 0);
	assert_int_equal(stale, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_not_found),
		cmocka_unit_test(test_invalid_key),
		cmocka_unit_test(test_key_too_long),
		cmocka_unit_test_setup_teardown(test_permission_denied,
						setup_fs, teardown_fs),
		cmocka_unit_test_setup_teardown(test_not_empty, setup_fs,
						teardown_fs),
		cmocka_unit_test(test_is_directory),
		cmocka_unit_test_setup_teardown(test_not_directory, setup_fs,
						teardown_fs),
		cmocka_unit_test_setup_teardown(test_no_attr, setup_fs,
						teardown_fs),
		cmocka_unit_test(test_already_exists),
		cmocka_unit_test(test_precondition_failed),
		cmocka_unit_test(test_not_supported),
		cmocka_unit_test(test_invalid_argument),
		cmocka_unit_test_setup_teardown(test_no_space, setup_tmpfs,
						teardown_fs),
		cmocka_unit_test(test_no_memory),
		cmocka_unit_test(test_io_error),
		cmocka_unit_test(test_connection_failed),
		cmocka_unit_test(test_all_backends_down),
		cmocka_unit_test(test_backend_timeout),
		cmocka_unit_test(test_backend_aborted),
		cmocka_unit_test(test_backend_draining),
		cmocka_unit_test(test_write_fanout_partial),
		cmocka_unit_test(test_write_quorum_failed),
		cmocka_unit_test(test_invalid_weight),
		cmocka_unit_test(test_weighted_requires_weights),
		cmocka_unit_test(test_backend_name_conflict),
		cmocka_unit_test(test_backend_not_found),
		cmocka_unit_test(test_recursion_depth_exceeded),
		cmocka_unit_test(test_healthcheck_failed),
		cmocka_unit_test(test_mirror_origin_required),
		cmocka_unit_test(test_invalid_options),
		cmocka_unit_test_setup_teardown(test_hint_journal_failed,
						setup_fs, teardown_fs),
		cmocka_unit_test(test_local_io),
		cmocka_unit_test(test_swift_credential_expired),
		cmocka_unit_test_setup_teardown(test_http_codes, setup_http,
						teardown_http),
		cmocka_unit_test(test_not_reachable_yet_helpers),
		cmocka_unit_test(test_every_code_triggered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
