/* SPDX-License-Identifier: MIT */
/*
 * test_file.c - the file backend (src/backends/file*.c): round trips,
 * ranges, markers, listing order, the writer, copy, deletes, and the
 * containment of every operation beneath the root (symlinks planted inside
 * the root pointing outside, traversal keys, through the dispatch wrappers
 * and straight through the ops table).
 *
 * Every test works in its own mkdtemp directory under /tmp and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backends/file_internal.h"
#include "smux/backend.h"
#include "smux/file.h"
#include "smux/memory.h"

#define MB ((size_t)1024 * 1024)

struct env {
	char base[64];		/* mkdtemp directory */
	char root[PATH_MAX];	/* base/root: the backend */
	struct smux_backend *b; /* a file backend on root */
	struct smux_ctx ctx;
	struct smux_error err;
};

/* ---- helpers ---- */

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup_opts(void **state, bool no_fsync)
{
	struct smux_file_opts opts = {.no_fsync = no_fsync};
	struct env *env = calloc(1, sizeof(*env));

	assert_non_null(env);
	snprintf(env->base, sizeof(env->base), "/tmp/smux-test-file.XXXXXX");
	assert_non_null(mkdtemp(env->base));
	snprintf(env->root, sizeof(env->root), "%s/root", env->base);
	assert_int_equal(mkdir(env->root, 0755), 0);
	opts.path = env->root;
	assert_int_equal(smux_file_new("file-t", &opts, &env->b, &env->err), 0);
	smux_ctx_init(&env->ctx);
	*state = env;
	return 0;
}

/* The default: every fsync done, as in production. */
static int setup(void **state)
{
	return setup_opts(state, false);
}

/* For the tests that make many objects (listing, attacks). */
static int setup_fast(void **state)
{
	return setup_opts(state, true);
}

static int teardown(void **state)
{
	struct env *env = *state;

	smux_backend_unref(env->b);
	rm_rf(env->base);
	free(env);
	return 0;
}

/* A path under the test's base directory. */
static const char *at(struct env *env, const char *rel)
{
	static _Thread_local char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s/%s", env->base, rel);
	return buf;
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)),
			 (ssize_t)strlen(content));
	close(fd);
}

static int put_str(struct env *env, const char *key, const char *s)
{
	return smux_backend_put_buf(env->b, &env->ctx, key, s, strlen(s),
				    &env->err);
}

static void expect_content(struct env *env, const char *key, const char *want)
{
	unsigned char *buf;
	size_t len;

	assert_int_equal(smux_backend_get_all(env->b, &env->ctx, key, &buf,
					      &len, &env->err),
			 0);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(buf, want, len);
	free(buf);
}

static void expect_code(int rc, const struct smux_error *err,
			enum smux_code code)
{
	assert_true(rc < 0);
	if (err->e.code != code)
		fail_msg("expected %s, got %s: %s", smux_code_name(code),
			 smux_code_name(err->e.code), err->e.message);
}

static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len ? len : 1);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 131 + seed) ^ (i >> 11));
	return p;
}

/* Counts ".smux-tmp.*" files anywhere under @dir. */
static int count_tmp(const char *dir)
{
	char sub[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strncmp(de->d_name, ".smux-tmp.", 10))
			n++;
		if (de->d_type == DT_DIR) {
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			n += count_tmp(sub);
		}
	}
	closedir(d);
	return n;
}

/* A listing collected as "k1,[p2/],k3" (prefix entries in brackets). */
struct coll {
	char out[65536];
	size_t len;
	unsigned n;
	unsigned stop_after; /* 0: never */
	char last[SMUX_KEY_MAX + 1];
	bool unordered;
};

static int coll_fn(void *arg, const struct smux_list_entry *e)
{
	struct coll *c = arg;
	int w;

	if (c->n && strcmp(c->last, e->key) >= 0)
		c->unordered = true;
	snprintf(c->last, sizeof(c->last), "%s", e->key);
	if (!e->is_prefix && smux_key_is_dir(e->key))
		assert_true(S_ISDIR(e->info.mode));
	else if (!e->is_prefix)
		assert_true(S_ISREG(e->info.mode) || S_ISLNK(e->info.mode) ||
			    S_ISFIFO(e->info.mode));
	w = snprintf(c->out + c->len, sizeof(c->out) - c->len,
		     e->is_prefix ? "%s[%s]" : "%s%s", c->n ? "," : "", e->key);
	assert_true(w > 0 && (size_t)w < sizeof(c->out) - c->len);
	c->len += (size_t)w;
	c->n++;
	return c->stop_after && c->n >= c->stop_after;
}

static const char *list(struct env *env, struct coll *c, const char *prefix,
			const char *delim)
{
	unsigned stop = c->stop_after;

	memset(c, 0, sizeof(*c));
	c->stop_after = stop;
	assert_int_equal(smux_backend_list(env->b, &env->ctx, prefix, delim,
					   coll_fn, c, &env->err),
			 0);
	assert_false(c->unordered);
	return c->out;
}

/* ---- round trips ---- */

static void test_roundtrip(void **state)
{
	struct env *env = *state;
	struct smux_put_opts opts = {.mode = 0600,
				     .mtime_ns = 1234567890123456789LL};
	struct smux_info info, info2;
	struct smux_source src;
	unsigned char *big, *got;
	size_t len;
	int fd;

	assert_int_equal(put_str(env, "a.txt", "hello"), 0);
	expect_content(env, "a.txt", "hello");
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "a.txt", &info, &env->err),
		0);
	assert_int_equal(info.size, 5);
	assert_int_equal(info.mode, S_IFREG | 0644);
	assert_true(info.etag[0]);

	/* Overwrite: new content, new etag. */
	assert_int_equal(put_str(env, "a.txt", "world"), 0);
	expect_content(env, "a.txt", "world");
	assert_int_equal(smux_backend_head(env->b, &env->ctx, "a.txt", &info2,
					   &env->err),
			 0);
	assert_string_not_equal(info.etag, info2.etag);

	/* Nested keys create their directories; empty objects work. */
	assert_int_equal(put_str(env, "x/y/z/empty", ""), 0);
	expect_content(env, "x/y/z/empty", "");

	/* Mode and mtime from the options; info matches head. */
	smux_source_buf(&src, "m", 1);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "m", &src, &opts,
					  &info, &env->err),
			 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "m", &info2, &env->err),
		0);
	assert_int_equal(info2.mode, S_IFREG | 0600);
	assert_int_equal(info2.mtime_ns, opts.mtime_ns);
	assert_string_equal(info.etag, info2.etag);

	/* Bigger than a chunk, from a buffer and from an fd. */
	big = pattern(3 * MB + 17, 7);
	smux_source_buf(&src, big, 3 * MB + 17);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "big/buf", &src,
					  NULL, NULL, &env->err),
			 0);
	assert_int_equal(smux_backend_get_all(env->b, &env->ctx, "big/buf",
					      &got, &len, &env->err),
			 0);
	assert_int_equal(len, 3 * MB + 17);
	assert_memory_equal(got, big, len);
	free(got);

	fd = open(at(env, "src.bin"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, big, 3 * MB + 17), (ssize_t)(3 * MB + 17));
	smux_source_fd(&src, fd, 100, 2 * MB);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "big/fd", &src,
					  NULL, NULL, &env->err),
			 0);
	close(fd);
	assert_int_equal(smux_backend_get_all(env->b, &env->ctx, "big/fd", &got,
					      &len, &env->err),
			 0);
	assert_int_equal(len, 2 * MB);
	assert_memory_equal(got, big + 100, len);
	free(got);
	free(big);

	assert_int_equal(count_tmp(env->root), 0);
}

static void test_missing(void **state)
{
	struct env *env = *state;
	unsigned char *buf;
	struct smux_info info;
	size_t len;
	int rc;

	rc = smux_backend_get_all(env->b, &env->ctx, "nope", &buf, &len,
				  &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(env->err.e.sys_errno, ENOENT);
	rc = smux_backend_head(env->b, &env->ctx, "no/such/key", &info,
			       &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	/* A path through a file names no key either. */
	assert_int_equal(put_str(env, "f", "x"), 0);
	rc = smux_backend_head(env->b, &env->ctx, "f/x", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_get_all(env->b, &env->ctx, "f/x", &buf, &len,
				  &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
}

/* A source that fails after its first chunk. */
static long failing_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)arg;
	if (pos >= MB)
		return -EIO;
	memset(dst, 'z', len);
	return (long)len;
}

static void test_put_failure_cleans_up(void **state)
{
	struct env *env = *state;
	struct smux_cancel cancel;
	struct smux_source src;
	struct smux_ctx ctx;
	int rc;

	assert_int_equal(put_str(env, "keep", "old"), 0);
	smux_source_cb(&src, failing_read, NULL, 3 * MB);
	rc = smux_backend_put(env->b, &env->ctx, "keep", &src, NULL, NULL,
			      &env->err);
	assert_true(rc < 0);
	expect_content(env, "keep", "old");

	/* A cancelled context stops the put; nothing is left behind. */
	smux_cancel_init(&cancel);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_ctx_derive(&ctx, &env->ctx, 0, &cancel), 0);
	smux_cancel_fire(&cancel, SMUX_CANCEL_ABORT);
	rc = smux_backend_put_buf(env->b, &ctx, "keep", "new", 3, &env->err);
	expect_code(rc, &env->err, SMUX_E_BACKEND_ABORTED);
	/* Straight through the ops table too (the wrapper checks first). */
	smux_source_buf(&src, "new", 3);
	rc = env->b->ops->put(env->b, &ctx, "keep", &src, NULL, NULL,
			      &env->err);
	expect_code(rc, &env->err, SMUX_E_BACKEND_ABORTED);
	smux_cancel_release(&cancel);
	expect_content(env, "keep", "old");
	assert_int_equal(count_tmp(env->root), 0);
}

/* ---- ranges and version pins ---- */

static void get_range(struct env *env, const char *key, uint64_t off,
		      uint64_t len, const char *if_match, unsigned char *out,
		      size_t cap, size_t *got, int *rc)
{
	struct smux_get_opts opts = {
		.offset = off, .length = len, .if_match = if_match};
	struct smux_sink sink;

	smux_sink_buf(&sink, out, cap);
	*rc = smux_backend_get(env->b, &env->ctx, key, &opts, &sink, NULL,
			       &env->err);
	*got = (size_t)sink.written;
}

static void test_ranged_get(void **state)
{
	struct env *env = *state;
	const size_t size = 3 * MB + 5;
	unsigned char *data = pattern(size, 3), *out = malloc(2 * MB);
	struct smux_info info;
	size_t got;
	int rc;

	assert_non_null(out);
	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, "r", data,
					      size, &env->err),
			 0);
	get_range(env, "r", MB - 5, 10, NULL, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, 10);
	assert_memory_equal(out, data + MB - 5, 10);

	/* Across chunk boundaries. */
	get_range(env, "r", MB / 2, MB + 7, NULL, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, MB + 7);
	assert_memory_equal(out, data + MB / 2, MB + 7);

	/* A length past the end is cut; an offset at or past it is empty. */
	get_range(env, "r", size - 3, 100, NULL, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, 3);
	assert_memory_equal(out, data + size - 3, 3);
	get_range(env, "r", size, SMUX_LEN_ALL, NULL, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, 0);
	get_range(env, "r", size + 1000, 10, NULL, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, 0);

	/* Version pins. */
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "r", &info, &env->err), 0);
	get_range(env, "r", 0, 4, info.etag, out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(got, 4);
	assert_int_equal(put_str(env, "r", "replaced"), 0);
	get_range(env, "r", 0, 4, info.etag, out, 2 * MB, &got, &rc);
	expect_code(rc, &env->err, SMUX_E_PRECONDITION_FAILED);
	assert_int_equal(got, 0);
	get_range(env, "r", 0, 4, "", out, 2 * MB, &got, &rc);
	assert_int_equal(rc, 0);
	assert_memory_equal(out, "repl", 4);
	free(data);
	free(out);
}

/* ---- directories ---- */

static void test_markers(void **state)
{
	struct env *env = *state;
	struct smux_info info;
	unsigned char *buf;
	struct stat st;
	size_t len;
	int rc;

	assert_int_equal(put_str(env, "d/", ""), 0);
	assert_int_equal(stat(at(env, "root/d"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(put_str(env, "d/", ""), 0); /* idempotent */
	assert_int_equal(put_str(env, "p/q/r/", ""), 0);
	assert_int_equal(stat(at(env, "root/p/q/r"), &st), 0);

	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "d/", &info, &env->err),
		0);
	assert_true(S_ISDIR(info.mode));
	assert_int_equal(info.size, 0);
	/* head("d") of a directory answers with directory info too. */
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "d", &info, &env->err), 0);
	assert_true(S_ISDIR(info.mode));

	rc = smux_backend_get_all(env->b, &env->ctx, "d", &buf, &len,
				  &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = smux_backend_get_all(env->b, &env->ctx, "d/", &buf, &len,
				  &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = put_str(env, "d", "x");
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = smux_backend_del(env->b, &env->ctx, "d", &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);

	/* A file in the middle of a path. */
	assert_int_equal(put_str(env, "f", "x"), 0);
	rc = put_str(env, "f/x", "y");
	expect_code(rc, &env->err, SMUX_E_NOT_DIRECTORY);
	rc = put_str(env, "f/x/", "");
	expect_code(rc, &env->err, SMUX_E_NOT_DIRECTORY);
	rc = smux_backend_head(env->b, &env->ctx, "f/", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);

	/* Markers take no content. */
	rc = env->b->ops->put(env->b, &env->ctx, "e/",
			      &(struct smux_source){.kind = SMUX_SOURCE_BUF,
						    .length = 1,
						    .u.buf = "x"},
			      NULL, NULL, &env->err);
	expect_code(rc, &env->err, SMUX_E_INVALID_ARGUMENT);

	/* A FIFO made behind the backend is an empty object, never read
	 * (that would block): get answers at once with no content. */
	assert_int_equal(mkfifo(at(env, "root/fifo"), 0600), 0);
	rc = smux_backend_get_all(env->b, &env->ctx, "fifo", &buf, &len,
				  &env->err);
	assert_int_equal(rc, 0);
	assert_int_equal(len, 0);
	free(buf);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "fifo", &info, &env->err),
		0);
	assert_true(S_ISFIFO(info.mode));
	rc = smux_backend_head(env->b, &env->ctx, "fifo/", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "fifo", &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/fifo"), &st), -1);

	/* rmdir: empty goes, non-empty is refused. */
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "d/", &env->err),
			 0);
	rc = smux_backend_head(env->b, &env->ctx, "d/", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(put_str(env, "full/x", "1"), 0);
	rc = smux_backend_del(env->b, &env->ctx, "full/", &env->err);
	expect_code(rc, &env->err, SMUX_E_NOT_EMPTY);
	expect_content(env, "full/x", "1");
}

static void test_del(void **state)
{
	struct env *env = *state;
	struct smux_info info;
	int rc;

	assert_int_equal(put_str(env, "a/b", "1"), 0);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "a/b", &env->err),
			 0);
	rc = smux_backend_head(env->b, &env->ctx, "a/b", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	/* Idempotent, also through missing directories and files. */
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "a/b", &env->err),
			 0);
	assert_int_equal(
		smux_backend_del(env->b, &env->ctx, "no/such/x", &env->err), 0);
	assert_int_equal(put_str(env, "f", "1"), 0);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "f/x", &env->err),
			 0);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "f/", &env->err),
			 0);
	expect_content(env, "f", "1"); /* "f/" is no marker of file f */
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "zz/", &env->err),
			 0);
	/* The emptied directory stays, as a marker. */
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "a/", &info, &env->err),
		0);
}

/* ---- listing ---- */

static void test_list_order(void **state)
{
	struct env *env = *state;
	struct coll c = {0};

	assert_int_equal(put_str(env, "a/c/d", "12"), 0);
	assert_int_equal(put_str(env, "a.txt", "1"), 0);
	assert_int_equal(put_str(env, "a/b", "1"), 0);
	assert_int_equal(put_str(env, "a0", "1"), 0);
	assert_int_equal(put_str(env, "b", "1"), 0);
	assert_int_equal(put_str(env, "empty/", ""), 0);
	assert_int_equal(put_str(env, "a-", "1"), 0);
	/* Never listed: the work folder's temp files. Symlinks and FIFOs
	 * are, as such. */
	write_file(at(env, "root/.smuxfs-tmp/.smux-tmp.0123456789abcdef"),
		   "tmp");
	assert_int_equal(symlink("a.txt", at(env, "root/sl")), 0);
	assert_int_equal(symlink("a", at(env, "root/a/sldir")), 0);
	assert_int_equal(mkfifo(at(env, "root/fifo"), 0600), 0);

	assert_string_equal(list(env, &c, "", NULL),
			    "a-,a.txt,a/b,a/c/d,a/sldir,a0,b,empty/,fifo,sl");
	assert_string_equal(list(env, &c, "", "/"),
			    "a-,a.txt,[a/],a0,b,[empty/],fifo,sl");
	assert_string_equal(list(env, &c, "a", "/"), "a-,a.txt,[a/],a0");
	assert_string_equal(list(env, &c, "a", NULL),
			    "a-,a.txt,a/b,a/c/d,a/sldir,a0");
	assert_string_equal(list(env, &c, "a/", "/"), "a/b,[a/c/],a/sldir");
	assert_string_equal(list(env, &c, "a/", NULL), "a/b,a/c/d,a/sldir");
	assert_string_equal(list(env, &c, "a/c", NULL), "a/c/d");
	assert_string_equal(list(env, &c, "empty/", NULL), "empty/");
	assert_string_equal(list(env, &c, "empty/", "/"), "");
	assert_string_equal(list(env, &c, "empt", NULL), "empty/");
	assert_string_equal(list(env, &c, "missing/", NULL), "");
	assert_string_equal(list(env, &c, "missing/x", "/"), "");
	assert_string_equal(list(env, &c, "b/", NULL), "");
	assert_string_equal(list(env, &c, "zzz", NULL), "");
	assert_string_equal(list(env, &c, "sl", NULL), "sl");
	/* never descended into: a/sldir points at a directory */
	memset(&c, 0, sizeof(c));
	assert_true(smux_backend_list(env->b, &env->ctx, "a/sldir/", NULL,
				      coll_fn, &c, &env->err) < 0);
	assert_int_equal(c.n, 0);

	/* The callback stops the listing. */
	c.stop_after = 2;
	assert_string_equal(list(env, &c, "", NULL), "a-,a.txt");
	c.stop_after = 0;
}

/* Keys from a small alphabet rich in the bytes around '/'. */
static void random_key(char *key, size_t cap, unsigned *seed)
{
	static const char alpha[] = "a.-/0_~";
	size_t len = 1 + (size_t)(rand_r(seed) % 8), i;

	for (i = 0; i < len && i + 1 < cap; i++)
		key[i] = alpha[rand_r(seed) % (sizeof(alpha) - 1)];
	key[i] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_list_random(void **state)
{
	struct env *env = *state;
	char *keys[400], joined[65536], key[16];
	struct coll *c = calloc(1, sizeof(*c));
	unsigned seed = 42, n = 0, i, j;
	size_t len = 0;

	assert_non_null(c);
	for (i = 0; i < 400; i++) {
		random_key(key, sizeof(key), &seed);
		if (smux_key_check(key, SMUX_KEY_OBJECT, NULL, NULL))
			continue;
		if (put_str(env, key, "v"))
			continue; /* a file/directory clash: fine */
		for (j = 0; j < n && strcmp(keys[j], key) != 0; j++)
			;
		if (j == n)
			keys[n++] = strdup(key);
	}
	assert_true(n > 50);
	qsort(keys, n, sizeof(*keys), cmp_str);
	joined[0] = '\0';
	for (i = 0; i < n; i++) {
		len += (size_t)snprintf(joined + len, sizeof(joined) - len,
					"%s%s", i ? "," : "", keys[i]);
		free(keys[i]);
	}
	assert_string_equal(list(env, c, "", NULL), joined);
	/* Each delimited level is ordered too (coll checks). */
	list(env, c, "", "/");
	list(env, c, "a", "/");
	list(env, c, "a/", "/");
	list(env, c, "-", NULL);
	free(c);
}

/* ---- writer ---- */

static void writer_write(struct env *env, struct smux_writer *w, const char *s,
			 uint64_t off)
{
	assert_int_equal(
		smux_writer_pwrite(w, &env->ctx, s, strlen(s), off, &env->err),
		0);
}

static void writer_commit(struct env *env, struct smux_writer *w,
			  const struct smux_put_opts *opts)
{
	assert_int_equal(
		smux_writer_commit(w, &env->ctx, opts, NULL, &env->err), 0);
}

static void test_writer(void **state)
{
	struct env *env = *state;
	struct smux_put_opts mode600 = {.mode = 0600};
	struct smux_put_opts durable = {.durable = true};
	struct smux_writer *w;
	struct smux_info info;
	char buf[64];
	int rc;

	assert_int_equal(put_str(env, "w", "hello world"), 0);
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "w", 0, &w,
						  &env->err),
			 0);
	assert_int_equal(smux_writer_size(w), 11);
	assert_int_equal(smux_writer_pread(w, buf, sizeof(buf), 0, &env->err),
			 11);
	assert_memory_equal(buf, "hello world", 11);
	writer_write(env, w, "HELLO", 0);
	expect_content(env, "w", "hello world"); /* not yet */
	assert_int_equal(smux_writer_pread(w, buf, 5, 0, &env->err), 5);
	assert_memory_equal(buf, "HELLO", 5);
	writer_commit(env, w, NULL);
	expect_content(env, "w", "HELLO world");
	/* More writes after a commit stay pending until the next one. */
	writer_write(env, w, "!", 11);
	assert_int_equal(smux_writer_size(w), 12);
	expect_content(env, "w", "HELLO world");
	writer_commit(env, w, NULL);
	expect_content(env, "w", "HELLO world!");
	assert_int_equal(smux_writer_truncate(w, &env->ctx, 5, &env->err), 0);
	expect_content(env, "w", "HELLO world!");
	writer_commit(env, w, NULL);
	expect_content(env, "w", "HELLO");
	/* A commit without writes applies only the options; a durable one
	 * also syncs what an earlier commit left unsynced. */
	writer_commit(env, w, &mode600);
	writer_commit(env, w, &durable);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "w", &info, &env->err), 0);
	assert_int_equal(info.mode, S_IFREG | 0600);
	expect_content(env, "w", "HELLO");
	/* Extending truncate and a hole of zeros. */
	assert_int_equal(smux_writer_truncate(w, &env->ctx, 7, &env->err), 0);
	writer_write(env, w, "Z", 9);
	writer_commit(env, w, NULL);
	smux_writer_close(w);
	{
		unsigned char *got;
		size_t len;

		assert_int_equal(smux_backend_get_all(env->b, &env->ctx, "w",
						      &got, &len, &env->err),
				 0);
		assert_int_equal(len, 10);
		assert_memory_equal(got, "HELLO\0\0\0\0Z", 10);
		free(got);
	}
	/* The file's mode survives writers that do not set one. */
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "w", &info, &env->err), 0);
	assert_int_equal(info.mode, S_IFREG | 0600);

	/* TRUNC starts empty; close without commit leaves the target. */
	assert_int_equal(put_str(env, "t", "original"), 0);
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "t",
						  SMUX_WRITER_TRUNC, &w,
						  &env->err),
			 0);
	assert_int_equal(smux_writer_size(w), 0);
	writer_write(env, w, "xyz", 0);
	smux_writer_close(w);
	expect_content(env, "t", "original");

	/* A new key in new directories. */
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "n/e/w", 0,
						  &w, &env->err),
			 0);
	assert_int_equal(smux_writer_size(w), 0);
	rc = smux_backend_head(env->b, &env->ctx, "n/e/w", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	writer_commit(env, w, NULL); /* an empty object */
	expect_content(env, "n/e/w", "");
	writer_write(env, w, "data", 0);
	writer_commit(env, w, &durable);
	smux_writer_close(w);
	expect_content(env, "n/e/w", "data");

	/* The writer's content is the object at open: a commit without
	 * writes republishes it over a put made meanwhile. */
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "t", 0, &w,
						  &env->err),
			 0);
	assert_int_equal(put_str(env, "t", "someone else"), 0);
	writer_commit(env, w, NULL);
	smux_writer_close(w);
	expect_content(env, "t", "original");

	/* Directories and markers are no writer targets. */
	rc = smux_backend_writer_open(env->b, &env->ctx, "n/e", 0, &w,
				      &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = env->b->ops->writer_open(env->b, &env->ctx, "n/", 0, &w,
				      &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	assert_int_equal(count_tmp(env->root), 0);
}

struct race {
	struct env *env;
	atomic_bool stop;
	atomic_int bad;
	atomic_int reads;
};

#define RACE_SIZE ((size_t)256 * 1024)

static void *race_reader(void *arg)
{
	struct race *r = arg;
	struct smux_error err;
	unsigned char *buf;
	size_t len, i;

	while (!atomic_load(&r->stop)) {
		if (smux_backend_get_all(r->env->b, &r->env->ctx, "race", &buf,
					 &len, &err)) {
			atomic_fetch_add(&r->bad, 1);
			continue;
		}
		/* Old or new, never a mix or a partial object. */
		if (len != RACE_SIZE)
			atomic_fetch_add(&r->bad, 1);
		for (i = 1; i < len; i++)
			if (buf[i] != buf[0]) {
				atomic_fetch_add(&r->bad, 1);
				break;
			}
		free(buf);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

/* SMUX_WRITER_INPLACE: writes land in the file itself, at once; appends
 * land at the end as it is then; nothing is copied or renamed. */
static void test_writer_inplace(void **state)
{
	struct env *env = *state;
	struct smux_put_opts po = {.mode = 0640, .flags = SMUX_PUT_MODE};
	struct smux_writer *w;
	struct smux_info info;
	struct stat st, st2;
	char buf[64];
	int fd, rc;

	assert_true(smux_backend_caps(env->b) & SMUX_CAP_INPLACE);
	/* a new file: created at open, private until the commit */
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "d/log",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	assert_true(w->appends);
	assert_int_equal(stat(at(env, "root/d/log"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(
		smux_writer_pwrite(w, &env->ctx, "abc", 3, 0, &env->err), 0);
	expect_content(env, "d/log", "abc"); /* visible before any commit */
	/* another program appends behind our back; O_APPEND lands after */
	fd = open(at(env, "root/d/log"), O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "X", 1), 1);
	close(fd);
	assert_int_equal(smux_writer_pwrite(w, &env->ctx, "d", 1,
					    SMUX_OFF_APPEND, &env->err),
			 0);
	expect_content(env, "d/log", "abcXd");
	assert_int_equal(smux_writer_size(w), 5);
	/* stat: the file as stored now, also what others wrote */
	fd = open(at(env, "root/d/log"), O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "YY", 2), 2);
	assert_int_equal(smux_writer_stat(w, &info), 0);
	assert_int_equal(info.size, 7);
	assert_int_equal(ftruncate(fd, 5), 0);
	close(fd);
	/* setattr: through the descriptor, owner before mode (chown needs
	 * root) */
	if (geteuid() == 0) {
		struct smux_setattr sa = {
			.flags =
				SMUX_SET_MODE | SMUX_SET_OWNER | SMUX_SET_MTIME,
			.mode = 04750,
			.uid = 1000,
			.gid = SMUX_ID_NONE,
			.mtime_ns = 1400000000000000000LL,
		};

		assert_int_equal(smux_writer_setattr(w, &sa), 0);
		assert_int_equal(stat(at(env, "root/d/log"), &st), 0);
		assert_int_equal(st.st_mode & 07777, 04750);
		assert_int_equal(st.st_uid, 1000);
		assert_int_equal(st.st_mtim.tv_sec, 1400000000);
		sa.flags = SMUX_SET_OWNER | SMUX_SET_MODE;
		sa.uid = 0;
		sa.mode = 0600;
		assert_int_equal(smux_writer_setattr(w, &sa), 0);
	}
	assert_int_equal(smux_writer_pread(w, buf, sizeof(buf), 1, &env->err),
			 4);
	assert_memory_equal(buf, "bcXd", 4);
	po.mtime_ns = 1500000000123456789LL;
	assert_int_equal(
		smux_writer_commit(w, &env->ctx, &po, &info, &env->err), 0);
	assert_int_equal(info.size, 5);
	assert_int_equal(stat(at(env, "root/d/log"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal(st.st_mtim.tv_sec, 1500000000);
	assert_int_equal(st.st_mtim.tv_nsec, 123456789);
	/* more writes after a commit, then close without one: kept */
	assert_int_equal(smux_writer_pwrite(w, &env->ctx, "Z", 1, 0, &env->err),
			 0);
	smux_writer_close(w);
	expect_content(env, "d/log", "ZbcXd");

	/* reopening keeps the inode: an append costs no copy */
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "d/log",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	assert_int_equal(smux_writer_pwrite(w, &env->ctx, "!", 1,
					    SMUX_OFF_APPEND, &env->err),
			 0);
	po.durable = true;
	assert_int_equal(smux_writer_commit(w, &env->ctx, &po, NULL, &env->err),
			 0);
	smux_writer_close(w);
	assert_int_equal(stat(at(env, "root/d/log"), &st2), 0);
	assert_int_equal(st2.st_ino, st.st_ino);
	expect_content(env, "d/log", "ZbcXd!");
	assert_int_equal(count_tmp(at(env, "root")), 0);

	/* O_EXCL on an existing file; O_TRUNC empties it in place */
	rc = smux_backend_writer_open(env->b, &env->ctx, "d/log",
				      SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				      &w, &env->err);
	expect_code(rc, &env->err, SMUX_E_ALREADY_EXISTS);
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "d/log",
						  SMUX_WRITER_INPLACE |
							  SMUX_WRITER_TRUNC,
						  &w, &env->err),
			 0);
	expect_content(env, "d/log", "");
	smux_writer_close(w);
	assert_int_equal(stat(at(env, "root/d/log"), &st2), 0);
	assert_int_equal(st2.st_ino, st.st_ino);

	/* never through a symlink, never onto a directory */
	assert_int_equal(symlink("/etc/passwd", at(env, "root/d/link")), 0);
	rc = smux_backend_writer_open(env->b, &env->ctx, "d/link",
				      SMUX_WRITER_INPLACE, &w, &env->err);
	assert_true(rc < 0);
	assert_null(w);
	rc = smux_backend_writer_open(env->b, &env->ctx, "d",
				      SMUX_WRITER_INPLACE, &w, &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
}

/*
 * A directory already fsynced with no entry of any directory changed
 * since is not fsynced again: sqlite's commit fsyncs its new journal
 * (which syncs the journal's directory) and then the directory itself.
 * Any create, unlink, rename or link in between makes the next one real.
 */
static void test_dir_fsync_once(void **state)
{
	struct env *env = *state;
	struct smux_put_opts durable = {.durable = true};
	struct smux_writer *w;
	uint64_t n0;

	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "j/a",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	assert_int_equal(smux_writer_pwrite(w, &env->ctx, "x", 1, 0, &env->err),
			 0);
	n0 = smux__file_dir_fsyncs(env->b);
	writer_commit(env, w, &durable); /* the new name: its directory */
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 1);
	/* fsync of the directory (fsyncdir): nothing changed, skipped */
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "j/", &env->err),
			 0);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 1);
	/* fsync of the file again: no new name, no directory fsync */
	writer_commit(env, w, &durable);
	smux_writer_close(w);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 1);
	/* an unlink changes the directory: the next fsync is real */
	assert_int_equal(put_str(env, "j/b", "b"), 0); /* durable: syncs j */
	n0 = smux__file_dir_fsyncs(env->b);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "j/b", &env->err),
			 0);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "j/", &env->err),
			 0);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 1);
	/* a rename in another directory counts too (any directory) */
	assert_int_equal(put_str(env, "k/c", "c"), 0);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "j/", &env->err),
			 0);
	n0 = smux__file_dir_fsyncs(env->b);
	assert_int_equal(
		smux_backend_rename(env->b, &env->ctx, "k/c", "k/d", &env->err),
		0);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "j/", &env->err),
			 0);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 1);
	/* another directory is not the one synced last */
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "k/", &env->err),
			 0);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 2);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "k/", &env->err),
			 0);
	assert_int_equal(smux__file_dir_fsyncs(env->b), n0 + 2);
}

static void test_writer_concurrent_readers(void **state)
{
	struct env *env = *state;
	struct race r = {.env = env};
	unsigned char *chunk = malloc(RACE_SIZE);
	pthread_t th[3];
	int i, round;

	assert_non_null(chunk);
	memset(chunk, 'A', RACE_SIZE);
	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, "race", chunk,
					      RACE_SIZE, &env->err),
			 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r),
				 0);
	for (round = 0; round < 60; round++) {
		struct smux_writer *w;
		unsigned char c = (unsigned char)('B' + round % 20);
		unsigned off;

		memset(chunk, c, RACE_SIZE);
		if (round % 3 == 0) {
			assert_int_equal(smux_backend_put_buf(
						 env->b, &env->ctx, "race",
						 chunk, RACE_SIZE, &env->err),
					 0);
			continue;
		}
		assert_int_equal(smux_backend_writer_open(
					 env->b, &env->ctx, "race",
					 round % 2 ? SMUX_WRITER_TRUNC : 0, &w,
					 &env->err),
				 0);
		/* Several small writes: a reader must never see them. */
		for (off = 0; off < RACE_SIZE; off += RACE_SIZE / 8)
			assert_int_equal(smux_writer_pwrite(w, &env->ctx, chunk,
							    RACE_SIZE / 8, off,
							    &env->err),
					 0);
		writer_commit(env, w, NULL);
		smux_writer_close(w);
	}
	atomic_store(&r.stop, true);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.reads) > 0);
	assert_int_equal(count_tmp(env->root), 0);
	free(chunk);
}

/* ---- copy, health, statfs ---- */

static void test_copy(void **state)
{
	struct env *env = *state;
	struct smux_put_opts opts = {.mode = 0640,
				     .mtime_ns = 1000000000LL * 1600000000};
	struct smux_info a, b;
	struct smux_source src;
	unsigned char *big, *got;
	size_t len;
	int rc;

	smux_source_buf(&src, "copy me", 7);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "src", &src, &opts,
					  NULL, &env->err),
			 0);
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "src", "c/d/dst",
					   &env->err),
			 0);
	expect_content(env, "c/d/dst", "copy me");
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "src", &a, &env->err), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "c/d/dst", &b, &env->err),
		0);
	assert_int_equal(b.mode, S_IFREG | 0640);
	assert_int_equal(b.mtime_ns, opts.mtime_ns);
	/* same content, same mtime: the same version token (size, mtime) */
	assert_string_equal(a.etag, b.etag);

	/* Replaces an existing object; big objects too. */
	big = pattern(5 * MB + 3, 11);
	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, "bigsrc", big,
					      5 * MB + 3, &env->err),
			 0);
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "bigsrc", "src",
					   &env->err),
			 0);
	assert_int_equal(smux_backend_get_all(env->b, &env->ctx, "src", &got,
					      &len, &env->err),
			 0);
	assert_int_equal(len, 5 * MB + 3);
	assert_memory_equal(got, big, len);
	free(got);
	free(big);

	rc = smux_backend_copy(env->b, &env->ctx, "nope", "x", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_copy(env->b, &env->ctx, "src", "c/d", &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = smux_backend_copy(env->b, &env->ctx, "c", "x", &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	assert_int_equal(count_tmp(env->root), 0);
}

static void test_rename(void **state)
{
	struct env *env = *state;
	struct smux_put_opts opts = {.mode = 0604,
				     .mtime_ns = 1000000000LL * 1500000000};
	struct smux_info info;
	struct smux_source src;
	struct stat before, after;
	int rc;

	smux_source_buf(&src, "moving", 6);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "from/a", &src,
					  &opts, NULL, &env->err),
			 0);
	assert_int_equal(stat(at(env, "root/from/a"), &before), 0);
	assert_int_equal(smux_backend_rename(env->b, &env->ctx, "from/a",
					     "to/b/c", &env->err),
			 0);
	expect_content(env, "to/b/c", "moving");
	rc = smux_backend_head(env->b, &env->ctx, "from/a", &info, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	/* The same inode, mode and mtime: a real rename, not a copy. */
	assert_int_equal(stat(at(env, "root/to/b/c"), &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
	assert_int_equal(smux_backend_head(env->b, &env->ctx, "to/b/c", &info,
					   &env->err),
			 0);
	assert_int_equal(info.mode, S_IFREG | 0604);
	assert_int_equal(info.mtime_ns, opts.mtime_ns);

	/* Replaces an object; refuses directories; missing source. */
	assert_int_equal(put_str(env, "other", "x"), 0);
	assert_int_equal(smux_backend_rename(env->b, &env->ctx, "other",
					     "to/b/c", &env->err),
			 0);
	expect_content(env, "to/b/c", "x");
	rc = smux_backend_rename(env->b, &env->ctx, "nope", "x", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_rename(env->b, &env->ctx, "nope/deeper", "x",
				 &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_rename(env->b, &env->ctx, "to/b/c", "to/b",
				 &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = smux_backend_rename(env->b, &env->ctx, "to", "elsewhere",
				 &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	expect_content(env, "to/b/c", "x");
	assert_int_equal(count_tmp(env->root), 0);
}

/* The reader: one version, kept whole across a replacing put, rename or
 * delete; an in-place change is PRECONDITION_FAILED, never a mix. */
static void test_reader(void **state)
{
	struct env *env = *state;
	unsigned char *want = pattern(3 * MB + 17, 7), *buf = malloc(MB);
	struct smux_reader *r, *r2;
	struct smux_info info;
	long n;
	int rc, fd;

	assert_non_null(buf);
	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, "d/big", want,
					      3 * MB + 17, &env->err),
			 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "d/big", &info, &env->err),
		0);
	assert_int_equal(smux_backend_reader_open(env->b, &env->ctx, "d/big",
						  &r, &env->err),
			 0);
	assert_int_equal(r->info.size, 3 * MB + 17);
	assert_string_equal(r->info.etag, info.etag);
	/* ranged reads, a short one at the end, none past it */
	n = smux_reader_pread(r, &env->ctx, buf, MB, MB + 5, &env->err);
	assert_int_equal(n, (long)MB);
	assert_memory_equal(buf, want + MB + 5, MB);
	n = smux_reader_pread(r, &env->ctx, buf, MB, 3 * MB, &env->err);
	assert_int_equal(n, 17);
	assert_memory_equal(buf, want + 3 * MB, 17);
	assert_int_equal(
		smux_reader_pread(r, &env->ctx, buf, MB, 4 * MB, &env->err), 0);
	/* replaced, then renamed away and deleted: the version stays */
	assert_int_equal(put_str(env, "d/big", "new"), 0);
	n = smux_reader_pread(r, &env->ctx, buf, 100, 0, &env->err);
	assert_int_equal(n, 100);
	assert_memory_equal(buf, want, 100);
	smux_reader_close(r);

	assert_int_equal(smux_backend_reader_open(env->b, &env->ctx, "d/big",
						  &r, &env->err),
			 0);
	assert_int_equal(r->info.size, 3);
	assert_int_equal(smux_backend_rename(env->b, &env->ctx, "d/big",
					     "d/moved", &env->err),
			 0);
	assert_int_equal(
		smux_backend_del(env->b, &env->ctx, "d/moved", &env->err), 0);
	n = smux_reader_pread(r, &env->ctx, buf, 100, 0, &env->err);
	assert_int_equal(n, 3);
	assert_memory_equal(buf, "new", 3);
	smux_reader_close(r);

	/* written in place behind the backend (a growing log): a live
	 * reader reads the new bytes, as a local file would (tail -f) */
	assert_int_equal(put_str(env, "d/inplace", "0123456789"), 0);
	assert_int_equal(smux_backend_reader_open(env->b, &env->ctx,
						  "d/inplace", &r, &env->err),
			 0);
	assert_int_equal(smux_backend_reader_open(env->b, &env->ctx,
						  "d/inplace", &r2, &env->err),
			 0);
	assert_true(r->live);
	assert_int_equal(r->info.size, 10);
	fd = open(at(env, "root/d/inplace"), O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "X", 1), 1);
	close(fd);
	n = smux_reader_pread(r, &env->ctx, buf, 20, 0, &env->err);
	assert_int_equal(n, 11);
	assert_memory_equal(buf, "0123456789X", 11);
	n = smux_reader_pread(r2, &env->ctx, buf, 20, 10, &env->err);
	assert_int_equal(n, 1);
	assert_memory_equal(buf, "X", 1);
	smux_reader_close(r);
	smux_reader_close(r2);

	/* a directory, a marker key, a missing key */
	rc = smux_backend_reader_open(env->b, &env->ctx, "d", &r, &env->err);
	expect_code(rc, &env->err, SMUX_E_IS_DIRECTORY);
	rc = smux_backend_reader_open(env->b, &env->ctx, "d/", &r, &env->err);
	assert_true(rc < 0);
	rc = smux_backend_reader_open(env->b, &env->ctx, "d/none", &r,
				      &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	free(want);
	free(buf);
}

static void test_setattr(void **state)
{
	struct env *env = *state;
	struct smux_setattr mode = {.flags = SMUX_SET_MODE, .mode = 0640};
	struct smux_setattr both = {.flags = SMUX_SET_MODE | SMUX_SET_MTIME,
				    .mode = 0700,
				    .mtime_ns = 1000000000LL * 1400000000 + 5};
	struct smux_info info;
	struct stat before, after;
	int rc;

	assert_int_equal(put_str(env, "s/obj", "keep me"), 0);
	assert_int_equal(stat(at(env, "root/s/obj"), &before), 0);
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "s/obj", &mode,
					      &env->err),
			 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "s/obj", &info, &env->err),
		0);
	assert_int_equal(info.mode, S_IFREG | 0640);
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "s/obj", &both,
					      &env->err),
			 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "s/obj", &info, &env->err),
		0);
	assert_int_equal(info.mode, S_IFREG | 0700);
	assert_int_equal(info.mtime_ns, both.mtime_ns);
	/* In place: same inode, same content. */
	assert_int_equal(stat(at(env, "root/s/obj"), &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
	expect_content(env, "s/obj", "keep me");

	/* Directories, by marker or plain key. */
	assert_int_equal(
		smux_backend_setattr(env->b, &env->ctx, "s/", &both, &env->err),
		0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "s/", &info, &env->err),
		0);
	assert_int_equal(info.mode, S_IFDIR | 0700);
	assert_int_equal(info.mtime_ns, both.mtime_ns);
	assert_int_equal(
		smux_backend_setattr(env->b, &env->ctx, "s", &mode, &env->err),
		0);
	assert_int_equal(stat(at(env, "root/s"), &after), 0);
	assert_int_equal(after.st_mode & 07777, 0640);

	rc = smux_backend_setattr(env->b, &env->ctx, "nope", &mode, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_setattr(env->b, &env->ctx, "s/obj/", &mode,
				  &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(chmod(at(env, "root/s"), 0755), 0);
}

/* Extended attributes: user.* set, read, listed and removed on the file
 * itself (the backend's own xattrs, so a copy outside smuxfs keeps them),
 * on directories, size queries and ERANGE, flags, other namespaces
 * refused and never listed, symlinks never followed. */
static void test_xattr(void **state)
{
	struct env *env = *state;
	char buf[64], list[256];
	size_t n = 0;
	ssize_t got;
	int rc;

	assert_true(smux_backend_caps(env->b) & SMUX_CAP_XATTR);
	assert_int_equal(put_str(env, "x/obj", "content"), 0);
	assert_int_equal(smux_backend_setxattr(env->b, &env->ctx, "x/obj",
					       "user.k", "value", 5, 0,
					       &env->err),
			 0);
	/* the file itself carries it */
	got = getxattr(at(env, "root/x/obj"), "user.k", buf, sizeof(buf));
	assert_int_equal(got, 5);
	assert_memory_equal(buf, "value", 5);
	/* size query, then the value */
	assert_int_equal(smux_backend_getxattr(env->b, &env->ctx, "x/obj",
					       "user.k", NULL, 0, &n,
					       &env->err),
			 0);
	assert_int_equal(n, 5);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(smux_backend_getxattr(env->b, &env->ctx, "x/obj",
					       "user.k", buf, sizeof(buf), &n,
					       &env->err),
			 0);
	assert_int_equal(n, 5);
	assert_string_equal(buf, "value");
	rc = smux_backend_getxattr(env->b, &env->ctx, "x/obj", "user.k", buf, 2,
				   &n, &env->err);
	expect_code(rc, &env->err, SMUX_E_INVALID_ARGUMENT);
	assert_int_equal(env->err.e.sys_errno, ERANGE);
	/* flags */
	rc = smux_backend_setxattr(env->b, &env->ctx, "x/obj", "user.k", "v", 1,
				   XATTR_CREATE, &env->err);
	expect_code(rc, &env->err, SMUX_E_ALREADY_EXISTS);
	rc = smux_backend_setxattr(env->b, &env->ctx, "x/obj", "user.none", "v",
				   1, XATTR_REPLACE, &env->err);
	expect_code(rc, &env->err, SMUX_E_NO_ATTR);
	assert_int_equal(rc, -ENODATA);
	/* an empty value is a value */
	assert_int_equal(smux_backend_setxattr(env->b, &env->ctx, "x/obj",
					       "user.empty", NULL, 0, 0,
					       &env->err),
			 0);
	/* other namespaces: refused, and never listed (trusted.* planted
	 * behind the backend when we are root) */
	rc = smux_backend_setxattr(env->b, &env->ctx, "x/obj", "trusted.t", "v",
				   1, 0, &env->err);
	expect_code(rc, &env->err, SMUX_E_NOT_SUPPORTED);
	rc = smux_backend_getxattr(env->b, &env->ctx, "x/obj",
				   "security.selinux", buf, sizeof(buf), &n,
				   &env->err);
	expect_code(rc, &env->err, SMUX_E_NOT_SUPPORTED);
	if (geteuid() == 0)
		assert_int_equal(
			setxattr(at(env, "root/x/obj"), "trusted.h", "x", 1, 0),
			0);
	assert_int_equal(smux_backend_listxattr(env->b, &env->ctx, "x/obj",
						NULL, 0, &n, &env->err),
			 0);
	assert_int_equal(n, sizeof("user.k") + sizeof("user.empty"));
	memset(list, 0, sizeof(list));
	assert_int_equal(smux_backend_listxattr(env->b, &env->ctx, "x/obj",
						list, sizeof(list), &n,
						&env->err),
			 0);
	assert_int_equal(n, sizeof("user.k") + sizeof("user.empty"));
	assert_true((strcmp(list, "user.k") == 0 &&
		     strcmp(list + 7, "user.empty") == 0) ||
		    (strcmp(list, "user.empty") == 0 &&
		     strcmp(list + 11, "user.k") == 0));
	rc = smux_backend_listxattr(env->b, &env->ctx, "x/obj", list, 4, &n,
				    &env->err);
	expect_code(rc, &env->err, SMUX_E_INVALID_ARGUMENT);
	assert_int_equal(env->err.e.sys_errno, ERANGE);
	/* remove */
	assert_int_equal(smux_backend_removexattr(env->b, &env->ctx, "x/obj",
						  "user.k", &env->err),
			 0);
	rc = smux_backend_getxattr(env->b, &env->ctx, "x/obj", "user.k", buf,
				   sizeof(buf), &n, &env->err);
	expect_code(rc, &env->err, SMUX_E_NO_ATTR);
	rc = smux_backend_removexattr(env->b, &env->ctx, "x/obj", "user.k",
				      &env->err);
	expect_code(rc, &env->err, SMUX_E_NO_ATTR);
	/* a directory, by plain key or marker */
	assert_int_equal(smux_backend_setxattr(env->b, &env->ctx, "x/",
					       "user.d", "1", 1, 0, &env->err),
			 0);
	assert_int_equal(smux_backend_getxattr(env->b, &env->ctx, "x", "user.d",
					       buf, sizeof(buf), &n, &env->err),
			 0);
	assert_int_equal(n, 1);
	rc = smux_backend_getxattr(env->b, &env->ctx, "x/obj/", "user.d", buf,
				   sizeof(buf), &n, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_getxattr(env->b, &env->ctx, "nope", "user.d", buf,
				   sizeof(buf), &n, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	/* a symlink key has none, and its target is never reached */
	assert_int_equal(symlink("obj", at(env, "root/x/link")), 0);
	rc = smux_backend_setxattr(env->b, &env->ctx, "x/link", "user.k", "v",
				   1, 0, &env->err);
	expect_code(rc, &env->err, SMUX_E_NOT_SUPPORTED);
	/* a symlinked directory on the path is not followed either */
	assert_int_equal(symlink("x", at(env, "root/xl")), 0);
	rc = smux_backend_getxattr(env->b, &env->ctx, "xl/obj", "user.empty",
				   buf, sizeof(buf), &n, &env->err);
	assert_true(rc < 0);
	assert_int_not_equal(env->err.e.code, SMUX_E_NO_ATTR);
	/* too long a name (ERANGE), too large a value (E2BIG) */
	{
		char name[300], *big = calloc(1, SMUX_XATTR_SIZE_MAX + 1);

		assert_non_null(big);
		memset(name, 'n', sizeof(name) - 1);
		memcpy(name, "user.", 5);
		name[sizeof(name) - 1] = '\0';
		rc = smux_backend_setxattr(env->b, &env->ctx, "x/obj", name,
					   "v", 1, 0, &env->err);
		expect_code(rc, &env->err, SMUX_E_INVALID_ARGUMENT);
		assert_int_equal(rc, -ERANGE);
		rc = smux_backend_setxattr(env->b, &env->ctx, "x/obj", "user.b",
					   big, SMUX_XATTR_SIZE_MAX + 1, 0,
					   &env->err);
		expect_code(rc, &env->err, SMUX_E_INVALID_ARGUMENT);
		assert_int_equal(rc, -E2BIG);
		free(big);
	}
}

/* Owners, atime, ctime and link counts: reported from the stat, set in
 * place (chown never follows, a 0000 file still takes attributes), a put
 * honours mode 0000 and an owner, and a writer's commit keeps the owner
 * of the object it replaces. Needs root for the chowns. */
static void test_owner_times(void **state)
{
	struct env *env = *state;
	struct smux_setattr own = {
		.flags = SMUX_SET_OWNER, .uid = 1234, .gid = SMUX_ID_NONE};
	struct smux_setattr zero = {.flags = SMUX_SET_MODE, .mode = 0};
	struct smux_setattr atime = {.flags = SMUX_SET_ATIME,
				     .atime_ns = 1000000000LL * 1000000000 + 7};
	struct smux_setattr grp = {
		.flags = SMUX_SET_OWNER, .uid = SMUX_ID_NONE, .gid = 4321};
	struct smux_put_opts po = {.mode = 0, .flags = SMUX_PUT_MODE};
	struct smux_source src;
	struct smux_writer *w;
	struct smux_info info;
	struct stat st;
	int64_t ctime0, mtime0;

	if (geteuid() != 0)
		skip();
	assert_true(smux_backend_caps(env->b) & SMUX_CAP_OWNER);
	assert_int_equal(put_str(env, "o/f", "data"), 0);
	assert_int_equal(mkdir(at(env, "root/o/sub1"), 0755), 0);
	assert_int_equal(mkdir(at(env, "root/o/sub2"), 0755), 0);
	assert_int_equal(stat(at(env, "root/o/f"), &st), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "o/f", &info, &env->err),
		0);
	assert_true(info.has_owner);
	assert_int_equal(info.uid, st.st_uid);
	assert_int_equal(info.gid, st.st_gid);
	assert_int_equal(info.nlink, 1);
	assert_int_equal(info.atime_ns,
			 (int64_t)st.st_atim.tv_sec * 1000000000 +
				 st.st_atim.tv_nsec);
	assert_int_equal(info.ctime_ns,
			 (int64_t)st.st_ctim.tv_sec * 1000000000 +
				 st.st_ctim.tv_nsec);
	ctime0 = info.ctime_ns;
	mtime0 = info.mtime_ns;
	/* a directory: 2 + its subdirectories (ext4, tmpfs) */
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "o/", &info, &env->err),
		0);
	assert_int_equal(info.nlink, 4);

	/* chown: the uid only, then the gid only */
	usleep(10000);
	assert_int_equal(
		smux_backend_setattr(env->b, &env->ctx, "o/f", &own, &env->err),
		0);
	assert_int_equal(
		smux_backend_setattr(env->b, &env->ctx, "o/f", &grp, &env->err),
		0);
	assert_int_equal(stat(at(env, "root/o/f"), &st), 0);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 4321);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "o/f", &info, &env->err),
		0);
	assert_int_equal(info.uid, 1234);
	assert_int_equal(info.gid, 4321);
	assert_true(info.ctime_ns > ctime0); /* chown changes the ctime */
	assert_int_equal(info.mtime_ns, mtime0);

	/* chmod 000, then attributes on the unreadable file: atime alone */
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "o/f", &zero,
					      &env->err),
			 0);
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "o/f", &atime,
					      &env->err),
			 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "o/f", &info, &env->err),
		0);
	assert_int_equal(info.mode, S_IFREG | 0);
	assert_int_equal(info.atime_ns, atime.atime_ns);
	assert_int_equal(info.mtime_ns, mtime0); /* UTIME_OMIT */

	/* a writer's commit keeps the owner of the object it replaces */
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "o/f",
						  SMUX_WRITER_TRUNC, &w,
						  &env->err),
			 0);
	assert_int_equal(
		smux_writer_pwrite(w, &env->ctx, "new", 3, 0, &env->err), 0);
	assert_int_equal(
		smux_writer_commit(w, &env->ctx, NULL, NULL, &env->err), 0);
	smux_writer_close(w);
	assert_int_equal(stat(at(env, "root/o/f"), &st), 0);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 4321);

	/* a put with mode 0000 and an owner; an object and a directory */
	po.flags |= SMUX_PUT_OWNER;
	po.uid = 65534;
	po.gid = 65534;
	smux_source_buf(&src, "x", 1);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "o/g", &src, &po,
					  NULL, &env->err),
			 0);
	assert_int_equal(stat(at(env, "root/o/g"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0);
	assert_int_equal(st.st_uid, 65534);
	assert_int_equal(st.st_gid, 65534);
	smux_source_buf(&src, "", 0);
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "o/d/", &src, &po,
					  NULL, &env->err),
			 0);
	assert_int_equal(stat(at(env, "root/o/d"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0);
	assert_int_equal(st.st_uid, 65534);
	/* without SMUX_PUT_MODE, 0 still means the default */
	po.flags = 0;
	assert_int_equal(smux_backend_put(env->b, &env->ctx, "o/h", &src, &po,
					  NULL, &env->err),
			 0);
	assert_int_equal(stat(at(env, "root/o/h"), &st), 0);
	assert_int_equal(st.st_mode & 07777, SMUX__FILE_DEFAULT_MODE);
	assert_int_equal(chmod(at(env, "root/o/d"), 0755), 0);
}

static void test_health_statfs_new(void **state)
{
	struct env *env = *state;
	struct smux_file_opts opts = {0};
	struct smux_backend *b2;
	struct smux_statfs sf;
	int rc;

	assert_int_equal(smux_backend_healthcheck(env->b, &env->ctx, &env->err),
			 0);
	assert_int_equal(smux_backend_statfs(env->b, &env->ctx, &sf, &env->err),
			 0);
	assert_true(sf.total_bytes > 0);
	assert_true(sf.free_bytes <= sf.total_bytes);

	rc = smux_file_new("x", &opts, &b2, &env->err);
	assert_true(rc < 0);
	opts.path = at(env, "does-not-exist");
	rc = smux_file_new("x", &opts, &b2, &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_null(b2);
	write_file(at(env, "plain"), "x");
	opts.path = at(env, "plain");
	rc = smux_file_new("x", &opts, &b2, &env->err);
	assert_true(rc < 0);

	/* A root removed under a running backend fails its healthcheck. */
	assert_int_equal(mkdir(at(env, "gone"), 0755), 0);
	opts.path = at(env, "gone");
	assert_int_equal(smux_file_new("gone", &opts, &b2, &env->err), 0);
	assert_int_equal(smux_backend_healthcheck(b2, &env->ctx, &env->err), 0);
	assert_int_equal(rmdir(at(env, "gone/.smuxfs-tmp")), 0);
	assert_int_equal(rmdir(at(env, "gone")), 0);
	rc = smux_backend_healthcheck(b2, &env->ctx, &env->err);
	assert_true(rc < 0);
	smux_backend_unref(b2);
}

/* ---- the work folder (crash leftovers) ---- */

/* Entries of @dir other than "." and "..". */
static int count_entries(const char *dir)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/*
 * Temp files live in <root>/.smuxfs-tmp only: a pending writer leaves
 * nothing beside its target (so rmdir of an emptied directory works after
 * a crash), user files named like temp files are ordinary keys, and the
 * work folder is neither listed nor addressable.
 */
static void test_work_folder(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;
	struct coll c = {0};
	struct smux_info info;
	struct stat st;

	assert_int_equal(lstat(at(env, "root/.smuxfs-tmp"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);

	/* A pending writer: its temp file is in the work folder. */
	assert_int_equal(put_str(env, "d/keep", "k"), 0);
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "d/new",
						  SMUX_WRITER_TRUNC, &w,
						  &env->err),
			 0);
	assert_int_equal(
		smux_writer_pwrite(w, &env->ctx, "abc", 3, 0, &env->err), 0);
	assert_int_equal(count_entries(at(env, "root/.smuxfs-tmp")), 1);
	assert_int_equal(count_entries(at(env, "root/d")), 1); /* keep */
	assert_int_equal(count_tmp(at(env, "root/d")), 0);
	assert_string_equal(list(env, &c, "", NULL), "d/keep");
	/* A crash here would leave d/ empty once keep is gone. */
	assert_int_equal(
		smux_backend_del(env->b, &env->ctx, "d/keep", &env->err), 0);
	assert_int_equal(count_entries(at(env, "root/d")), 0);
	/* Publishing renames from the work folder into d/. */
	writer_commit(env, w, NULL);
	smux_writer_close(w);
	expect_content(env, "d/new", "abc");
	assert_int_equal(count_entries(at(env, "root/.smuxfs-tmp")), 0);

	/* A user's ".smux-tmp.*" files are ordinary files. */
	write_file(at(env, "root/.smux-tmp.0123456789abcdef"), "u1");
	write_file(at(env, "root/d/.smux-tmp.x"), "u2");
	assert_string_equal(list(env, &c, "", NULL),
			    ".smux-tmp.0123456789abcdef,d/.smux-tmp.x,d/new");
	expect_content(env, "d/.smux-tmp.x", "u2");
	assert_int_equal(put_str(env, ".smux-tmp.y", "u3"), 0);
	expect_content(env, ".smux-tmp.y", "u3");

	/* The work folder is no key, at the root level only. */
	expect_code(put_str(env, ".smuxfs-tmp", "x"), &env->err,
		    SMUX_E_INVALID_KEY);
	expect_code(put_str(env, ".smuxfs-tmp/x", "x"), &env->err,
		    SMUX_E_INVALID_KEY);
	expect_code(put_str(env, ".smuxfs-tmp/", ""), &env->err,
		    SMUX_E_INVALID_KEY);
	expect_code(smux_backend_head(env->b, &env->ctx, ".smuxfs-tmp", &info,
				      &env->err),
		    &env->err, SMUX_E_INVALID_KEY);
	expect_code(
		smux_backend_del(env->b, &env->ctx, ".smuxfs-tmp/", &env->err),
		&env->err, SMUX_E_INVALID_KEY);
	assert_int_equal(put_str(env, "d/.smuxfs-tmp", "deep"), 0);
	expect_content(env, "d/.smuxfs-tmp", "deep");
	assert_int_equal(put_str(env, ".smuxfs-tmpx", "near"), 0);
	write_file(at(env, "root/.smuxfs-tmp/.smux-tmp.0000000000000000"), "t");
	assert_string_equal(list(env, &c, ".smuxfs-tmp/", NULL), "");
	assert_string_equal(list(env, &c, ".smuxfs", "/"), ".smuxfs-tmpx");
	assert_string_equal(list(env, &c, "", "/"),
			    ".smux-tmp.0123456789abcdef,.smux-tmp.y,"
			    ".smuxfs-tmpx,[d/]");
}

/*
 * Leftovers of a run that died are removed at the next open, unless
 * another live instance holds the folder (its pending temp files are not
 * leftovers). The lock is per open, so a second instance in this process
 * stands for a second daemon.
 */
static void test_work_sweep(void **state)
{
	struct env *env = *state;
	struct smux_file_opts opts = {.path = env->root};
	struct smux_backend *b2, *b3;

	write_file(at(env, "root/.smuxfs-tmp/.smux-tmp.00000000000000aa"),
		   "crash");
	write_file(at(env, "root/.smuxfs-tmp/.smux-tmp.00000000000000bb"),
		   "crash");
	assert_int_equal(mkdir(at(env, "root/.smuxfs-tmp/odd"), 0700), 0);
	assert_int_equal(smux_file_swept(env->b), 0);

	/* env->b is live: nothing is swept. */
	assert_int_equal(smux_file_new("second", &opts, &b2, &env->err), 0);
	assert_int_equal(smux_file_swept(b2), 0);
	assert_int_equal(count_entries(at(env, "root/.smuxfs-tmp")), 3);
	smux_backend_unref(b2);

	/* The last instance gone (a daemon killed): the next open sweeps. */
	smux_backend_unref(env->b);
	env->b = NULL;
	assert_int_equal(smux_file_new("third", &opts, &b3, &env->err), 0);
	assert_int_equal(smux_file_swept(b3), 3);
	assert_int_equal(count_entries(at(env, "root/.smuxfs-tmp")), 0);
	env->b = b3;
	assert_int_equal(smux_file_swept(NULL), 0);

	/* read_only: the root is never changed, leftovers stay. */
	write_file(at(env, "root/.smuxfs-tmp/.smux-tmp.00000000000000cc"),
		   "crash");
	opts.read_only = true;
	assert_int_equal(mkdir(at(env, "rofresh"), 0755), 0);
	opts.path = at(env, "rofresh");
	assert_int_equal(smux_file_new("ro1", &opts, &b2, &env->err), 0);
	assert_int_equal(access(at(env, "rofresh/.smuxfs-tmp"), F_OK), -1);
	expect_code(smux_backend_put_buf(b2, &env->ctx, "x", "x", 1, &env->err),
		    &env->err, SMUX_E_PERMISSION_DENIED);
	smux_backend_unref(b2);
	smux_backend_unref(env->b);
	env->b = NULL;
	opts.path = env->root;
	assert_int_equal(smux_file_new("ro2", &opts, &b2, &env->err), 0);
	assert_int_equal(smux_file_swept(b2), 0);
	assert_int_equal(count_entries(at(env, "root/.smuxfs-tmp")), 1);
	env->b = b2;
	opts.read_only = false;

	/* A work folder that is a symlink is refused, never followed. */
	assert_int_equal(mkdir(at(env, "other"), 0755), 0);
	assert_int_equal(symlink("..", at(env, "other/.smuxfs-tmp")), 0);
	opts.path = at(env, "other");
	assert_true(smux_file_new("sym", &opts, &b2, &env->err) < 0);
	assert_null(b2);
}

/* sync: an object with its directory, a directory, the root. */
static void test_sync(void **state)
{
	struct env *env = *state;
	struct smux_backend *mem;
	int rc;

	assert_int_equal(put_str(env, "d/e/f", "x"), 0);
	assert_int_equal(
		smux_backend_sync(env->b, &env->ctx, "d/e/f", &env->err), 0);
	assert_int_equal(
		smux_backend_sync(env->b, &env->ctx, "d/e/", &env->err), 0);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "d", &env->err),
			 0);
	assert_int_equal(smux_backend_sync(env->b, &env->ctx, "", &env->err),
			 0);
	rc = smux_backend_sync(env->b, &env->ctx, "d/missing", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_sync(env->b, &env->ctx, "missing/", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_sync(env->b, &env->ctx, "d/e/f/", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_sync(env->b, &env->ctx, "d/e/f/g", &env->err);
	expect_code(rc, &env->err, SMUX_E_KEY_NOT_FOUND);
	rc = smux_backend_sync(env->b, &env->ctx, ".smuxfs-tmp/", &env->err);
	expect_code(rc, &env->err, SMUX_E_INVALID_KEY);
	rc = smux_backend_sync(env->b, &env->ctx, "../x", &env->err);
	expect_code(rc, &env->err, SMUX_E_INVALID_KEY);
	/* a symlink in the way is refused, never followed */
	assert_int_equal(symlink("d", at(env, "root/ln")), 0);
	rc = smux_backend_sync(env->b, &env->ctx, "ln/e/", &env->err);
	expect_code(rc, &env->err, SMUX_E_PERMISSION_DENIED);
	/* a backend without ops->sync: nothing to do */
	assert_int_equal(smux_memory_new("m", &mem, &env->err), 0);
	assert_int_equal(smux_backend_sync(mem, &env->ctx, "any", &env->err),
			 0);
	smux_backend_unref(mem);
}

/* Root's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH taken out of (false)
 * or put back into (true) this thread's effective set, so a test run as
 * root meets file modes as any other user does (they stay permitted). */
static void dac_override(bool on)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	const unsigned caps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH};

	assert_int_equal(syscall(SYS_capget, &hdr, data), 0);
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		uint32_t bit = 1u << (caps[i] % 32);

		if (on)
			data[caps[i] / 32].effective |= bit;
		else
			data[caps[i] / 32].effective &= ~bit;
	}
	assert_int_equal(syscall(SYS_capset, &hdr, data), 0);
}

/* A root this process cannot write opens for reading; writes fail with
 * a reason. Run as root too, without the capabilities that let root
 * write anyway (it was skipped there: CI runs as root). */
static void test_work_readonly_root(void **state)
{
	struct env *env = *state;
	struct smux_file_opts opts = {0};
	struct smux_backend *b2;
	unsigned char *buf;
	size_t len;
	int made, got, rc;

	assert_int_equal(mkdir(at(env, "ro"), 0755), 0);
	write_file(at(env, "ro/f"), "ro");
	assert_int_equal(chmod(at(env, "ro"), 0555), 0);
	if (geteuid() == 0)
		dac_override(false);
	/* the asserts come once the capabilities are back */
	opts.path = at(env, "ro");
	made = smux_file_new("ro", &opts, &b2, &env->err);
	got = made ? -1
		   : smux_backend_get_all(b2, &env->ctx, "f", &buf, &len,
					  &env->err);
	if (got == 0)
		free(buf);
	rc = got ? -1
		 : smux_backend_put_buf(b2, &env->ctx, "g", "x", 1, &env->err);
	if (geteuid() == 0)
		dac_override(true);
	assert_int_equal(made, 0);
	assert_int_equal(got, 0);
	expect_code(rc, &env->err, SMUX_E_PERMISSION_DENIED);
	assert_int_equal(access(at(env, "ro/g"), F_OK), -1);
	smux_backend_unref(b2);
	chmod(at(env, "ro"), 0755);
}

/* ---- containment ---- */

/* FNV-1a of a file's bytes (or a symlink's target). */
static uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

struct snap {
	char *lines[256];
	unsigned n;
};

static void snap_walk(struct snap *s, const char *path, const char *rel)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char sub[PATH_MAX], subrel[PATH_MAX], line[PATH_MAX + 128];
	unsigned char buf[4096];
	struct dirent *de;
	struct stat st;
	ssize_t n;
	int fd;
	DIR *d;

	assert_int_equal(lstat(path, &st), 0);
	if (S_ISREG(st.st_mode)) {
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		assert_true(fd >= 0);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			h = hash_bytes(h, buf, (size_t)n);
		close(fd);
	} else if (S_ISLNK(st.st_mode)) {
		n = readlink(path, (char *)buf, sizeof(buf));
		assert_true(n > 0);
		h = hash_bytes(h, buf, (size_t)n);
	}
	snprintf(line, sizeof(line), "%s %o %lld %lld.%09ld %llx %llu", rel,
		 (unsigned)st.st_mode, (long long)st.st_size,
		 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		 (unsigned long long)h, (unsigned long long)st.st_ino);
	assert_true(s->n < 256);
	s->lines[s->n++] = strdup(line);
	if (!S_ISDIR(st.st_mode))
		return;
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		snprintf(subrel, sizeof(subrel), "%s/%s", rel, de->d_name);
		snap_walk(s, sub, subrel);
	}
	closedir(d);
}

static void snap_take(struct snap *s, const char *path)
{
	s->n = 0;
	snap_walk(s, path, ".");
	qsort(s->lines, s->n, sizeof(*s->lines), cmp_str);
}

static void snap_compare_free(struct snap *a, struct snap *b)
{
	unsigned i;

	assert_int_equal(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		assert_string_equal(a->lines[i], b->lines[i]);
		free(a->lines[i]);
		free(b->lines[i]);
	}
}

static int sink_count(void *arg, const void *data, size_t len)
{
	(void)data;
	*(size_t *)arg += len;
	return 0;
}

/* Every listed key must be one of the few legitimate ones inside. */
static int list_guard(void *arg, const struct smux_list_entry *e)
{
	/* the symlinks are objects inside: listed, never descended into */
	static const char *const ok[] = {"ok",	     "d/",	 "sub/",
					 "plain/",   "d/sub",	 "esc",
					 "link_out", "link_abs", "link_file"};
	unsigned i;

	(void)arg;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(e->key, ok[i]))
			return 0;
	fail_msg("listing leaked \"%s\"", e->key);
	return 1;
}

/* Tries every operation on @key through the wrappers; each must fail. */
static void attack_wrapped(struct env *env, const char *key)
{
	static const char *const delims[] = {NULL, "/"};
	struct smux_backend *b = env->b;
	struct smux_ctx *ctx = &env->ctx;
	struct smux_error *err = &env->err;
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	struct smux_setattr attr = {.flags = SMUX_SET_MODE | SMUX_SET_MTIME,
				    .mode = 0777,
				    .mtime_ns = 1};
	struct smux_writer *w = NULL;
	struct smux_sink sink;
	struct smux_info info;
	size_t got = 0;
	unsigned flags, i;
	int rc;

	smux_sink_cb(&sink, sink_count, NULL, &got);
	if (smux_backend_get(b, ctx, key, &all, &sink, &info, err) == 0)
		fail_msg("get \"%s\" succeeded", key);
	assert_int_equal(got, 0);
	if (smux_backend_head(b, ctx, key, &info, err) == 0)
		fail_msg("head \"%s\" succeeded", key);
	if (smux_backend_put_buf(b, ctx, key, "pwned", 5, err) == 0)
		fail_msg("put \"%s\" succeeded", key);
	if (smux_backend_put_buf(b, ctx, key, "", 0, err) == 0)
		fail_msg("put \"%s\" (empty) succeeded", key);
	if (smux_backend_del(b, ctx, key, err) == 0)
		fail_msg("del \"%s\" succeeded", key);
	if (smux_backend_copy(b, ctx, key, "copied", err) == 0)
		fail_msg("copy from \"%s\" succeeded", key);
	if (smux_backend_copy(b, ctx, "ok", key, err) == 0)
		fail_msg("copy to \"%s\" succeeded", key);
	if (smux_backend_rename(b, ctx, key, "renamed", err) == 0)
		fail_msg("rename from \"%s\" succeeded", key);
	if (smux_backend_rename(b, ctx, "ok", key, err) == 0)
		fail_msg("rename to \"%s\" succeeded", key);
	if (smux_backend_setattr(b, ctx, key, &attr, err) == 0)
		fail_msg("setattr \"%s\" succeeded", key);
	for (flags = 0; flags <= SMUX_WRITER_TRUNC; flags++) {
		rc = smux_backend_writer_open(b, ctx, key, flags, &w, err);
		if (rc == 0) {
			smux_writer_pwrite(w, ctx, "pwned", 5, 0, err);
			rc = smux_writer_commit(w, ctx, NULL, NULL, err);
			smux_writer_close(w);
			fail_msg("writer_open \"%s\" succeeded (commit %d)",
				 key, rc);
		}
	}
	{
		struct smux_reader *r;

		if (smux_backend_reader_open(b, ctx, key, &r, err) == 0) {
			smux_reader_close(r);
			fail_msg("reader_open \"%s\" succeeded", key);
		}
	}
	for (i = 0; i < 2; i++)
		smux_backend_list(b, ctx, key, delims[i], list_guard, NULL,
				  err);
	assert_int_equal(
		smux_backend_statfs(b, ctx, &(struct smux_statfs){0}, err), 0);
}

/* The same straight through the ops table: no wrapper validation. */
static void attack_direct(struct env *env, const char *key)
{
	const struct smux_backend_ops *ops = env->b->ops;
	struct smux_backend *b = env->b;
	struct smux_ctx *ctx = &env->ctx;
	struct smux_error *err = &env->err;
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	struct smux_setattr attr = {.flags = SMUX_SET_MODE | SMUX_SET_MTIME,
				    .mode = 0777,
				    .mtime_ns = 1};
	struct smux_writer *w = NULL;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_info info;
	size_t got = 0;
	unsigned flags;

	smux_sink_cb(&sink, sink_count, NULL, &got);
	smux_source_buf(&src, "pwned", 5);
	if (ops->get(b, ctx, key, &all, &sink, &info, err) == 0)
		fail_msg("ops->get \"%s\" succeeded", key);
	assert_int_equal(got, 0);
	if (ops->head(b, ctx, key, &info, err) == 0)
		fail_msg("ops->head \"%s\" succeeded", key);
	if (ops->put(b, ctx, key, &src, NULL, NULL, err) == 0)
		fail_msg("ops->put \"%s\" succeeded", key);
	smux_source_buf(&src, "", 0);
	if (ops->put(b, ctx, key, &src, NULL, NULL, err) == 0)
		fail_msg("ops->put \"%s\" (empty) succeeded", key);
	if (ops->del(b, ctx, key, err) == 0)
		fail_msg("ops->del \"%s\" succeeded", key);
	if (ops->copy(b, ctx, key, "copied", err) == 0)
		fail_msg("ops->copy from \"%s\" succeeded", key);
	if (ops->copy(b, ctx, "ok", key, err) == 0)
		fail_msg("ops->copy to \"%s\" succeeded", key);
	if (ops->rename(b, ctx, key, "renamed", err) == 0)
		fail_msg("ops->rename from \"%s\" succeeded", key);
	if (ops->rename(b, ctx, "ok", key, err) == 0)
		fail_msg("ops->rename to \"%s\" succeeded", key);
	if (ops->setattr(b, ctx, key, &attr, err) == 0)
		fail_msg("ops->setattr \"%s\" succeeded", key);
	for (flags = 0; flags <= SMUX_WRITER_TRUNC; flags++)
		if (ops->writer_open(b, ctx, key, flags, &w, err) == 0) {
			smux_writer_close(w);
			fail_msg("ops->writer_open \"%s\" succeeded", key);
		}
	{
		struct smux_reader *r;

		if (ops->reader_open(b, ctx, key, &r, err) == 0) {
			smux_reader_close(r);
			fail_msg("ops->reader_open \"%s\" succeeded", key);
		}
	}
	ops->list(b, ctx, key, "/", list_guard, NULL, err);
	ops->list(b, ctx, key, NULL, list_guard, NULL, err);
}

static void test_containment(void **state)
{
	struct env *env = *state;
	/* a key over SMUX_KEY_MAX (PATH_MAX - 1) */
	char outside[PATH_MAX], seg300[301], keylong[SMUX_KEY_MAX + 2],
		nulkey[32];
	struct snap before_out = {0}, after_out = {0};
	struct snap before_root = {0}, after_root = {0};
	const char *keys[] = {
		"../outside/secret",
		"/etc/passwd",
		"a/../../outside/x",
		"link_out/secret",
		"link_out/new",
		"link_out/sub/inner",
		"link_out/sub/",
		"link_out/newdir/",
		"link_out/",
		"link_abs/secret",
		"link_abs/",
		"d/sub/x",
		"d/sub/",
		"d/sub/inner/deeper",
		"esc/passwd",
		"esc/",
		"esc/shadow/",
		"..",
		"../",
		".",
		"./ok/../../outside/secret",
		"",
		"/",
		"ok/../../outside/secret",
		"d/../../outside/secret",
		seg300,
		keylong,
	};
	size_t i;
	int rootfd;

	/* base/outside/{secret, sub/inner}; inside root a file "ok" and
	 * symlinks out: relative, absolute, to a file, mid-path. */
	assert_int_equal(mkdir(at(env, "outside"), 0755), 0);
	assert_int_equal(mkdir(at(env, "outside/sub"), 0755), 0);
	write_file(at(env, "outside/secret"), "TOP SECRET");
	write_file(at(env, "outside/sub/inner"), "inner");
	snprintf(outside, sizeof(outside), "%s", at(env, "outside"));
	assert_int_equal(put_str(env, "ok", "fine"), 0);
	assert_int_equal(symlink("../outside", at(env, "root/link_out")), 0);
	assert_int_equal(symlink(outside, at(env, "root/link_abs")), 0);
	assert_int_equal(
		symlink("../outside/secret", at(env, "root/link_file")), 0);
	assert_int_equal(mkdir(at(env, "root/d"), 0755), 0);
	assert_int_equal(symlink(outside, at(env, "root/d/sub")), 0);
	assert_int_equal(symlink("../../etc", at(env, "root/esc")), 0);

	memset(seg300, 'x', 300);
	seg300[300] = '\0';
	for (i = 0; i < SMUX_KEY_MAX + 1; i++)
		keylong[i] = i % 10 == 9 ? '/' : 'k';
	keylong[SMUX_KEY_MAX + 1] = '\0';

	snap_take(&before_out, outside);
	snap_take(&before_root, env->root);

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		attack_wrapped(env, keys[i]);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		attack_direct(env, keys[i]);

	/* A NUL inside a key is refused where keys arrive with a length. */
	memcpy(nulkey, "ok\0../../outside/secret", 24);
	assert_true(smux_key_check_n(nulkey, 23, SMUX_KEY_OBJECT, "t",
				     &env->err) < 0);

	/* The primitive itself: openat2 beneath the root refuses escapes
	 * and symlinks whatever the key check says. */
	rootfd = open(env->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(rootfd >= 0);
	assert_int_equal(
		smux__file_open(rootfd, "../outside/secret", O_RDONLY, 0),
		-EXDEV);
	assert_int_equal(smux__file_open(rootfd, "/etc/passwd", O_RDONLY, 0),
			 -EXDEV);
	assert_int_equal(
		smux__file_open(rootfd, "ok/../../outside/secret", O_RDONLY, 0),
		-ENOTDIR);
	assert_int_equal(
		smux__file_open(rootfd, "d/../../outside/secret", O_RDONLY, 0),
		-EXDEV);
	assert_int_equal(
		smux__file_open(rootfd, "link_out/secret", O_RDONLY, 0),
		-ELOOP);
	assert_int_equal(smux__file_open(rootfd, "link_file", O_RDONLY, 0),
			 -ELOOP);
	assert_int_equal(
		smux__file_open(rootfd, "link_abs/secret", O_RDONLY, 0),
		-ELOOP);
	assert_int_equal(smux__file_open(rootfd, "d/sub/secret", O_RDONLY, 0),
			 -ELOOP);
	assert_int_equal(smux__file_open(rootfd, "link_out/x",
					 O_RDWR | O_CREAT | O_EXCL, 0600),
			 -ELOOP);
	close(rootfd);

	/* The symlinks now point at the real places: still not followed. */
	assert_int_equal(unlink(at(env, "root/link_out")), 0);
	assert_int_equal(symlink(outside, at(env, "root/link_out")), 0);
	attack_wrapped(env, "link_out/secret");
	assert_int_equal(unlink(at(env, "root/link_out")), 0);
	assert_int_equal(symlink("../outside", at(env, "root/link_out")), 0);

	/* Outside untouched, byte for byte; the root too (no leftovers, the
	 * symlinks unchanged) except link_out's recreated inode. */
	snap_take(&after_out, outside);
	snap_compare_free(&before_out, &after_out);
	for (i = 0; i < before_root.n; i++)
		if (strstr(before_root.lines[i], "./link_out ") ||
		    !strncmp(before_root.lines[i], ". ", 2)) {
			free(before_root.lines[i]);
			before_root.lines[i] = strdup("-");
		}
	snap_take(&after_root, env->root);
	for (i = 0; i < after_root.n; i++)
		if (strstr(after_root.lines[i], "./link_out ") ||
		    !strncmp(after_root.lines[i], ". ", 2)) {
			free(after_root.lines[i]);
			after_root.lines[i] = strdup("-");
		}
	qsort(before_root.lines, before_root.n, sizeof(char *), cmp_str);
	qsort(after_root.lines, after_root.n, sizeof(char *), cmp_str);
	snap_compare_free(&before_root, &after_root);
	{
		char target[PATH_MAX];
		ssize_t n = readlink(at(env, "root/link_file"), target,
				     sizeof(target) - 1);

		assert_true(n > 0);
		target[n] = '\0';
		assert_string_equal(target, "../outside/secret");
	}
	expect_content(env, "ok", "fine");
}

/* A listing of the root never descends through a symlinked directory. */
static void test_containment_list(void **state)
{
	struct env *env = *state;
	struct coll c = {0};

	assert_int_equal(mkdir(at(env, "outside"), 0755), 0);
	write_file(at(env, "outside/secret"), "TOP SECRET");
	assert_int_equal(symlink("../outside", at(env, "root/link_out")), 0);
	assert_int_equal(mkdir(at(env, "root/d"), 0755), 0);
	assert_int_equal(symlink("../../outside", at(env, "root/d/sub")), 0);
	assert_int_equal(put_str(env, "ok", "fine"), 0);

	/* The links are listed as links, never descended into. */
	assert_string_equal(list(env, &c, "", NULL), "d/sub,link_out,ok");
	assert_string_equal(list(env, &c, "", "/"), "[d/],link_out,ok");
	assert_string_equal(list(env, &c, "d/", NULL), "d/sub");
	assert_string_equal(list(env, &c, "d/s", NULL), "d/sub");
	assert_string_equal(list(env, &c, "link", NULL), "link_out");
	/* A prefix through a symlink: refused, never followed. */
	assert_true(smux_backend_list(env->b, &env->ctx, "link_out/", NULL,
				      coll_fn, &c, &env->err) < 0);
	assert_true(smux_backend_list(env->b, &env->ctx, "d/sub/", "/", coll_fn,
				      &c, &env->err) < 0);
	/* The last segment is a filter, never a path. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(env->b->ops->list(env->b, &env->ctx, "..", NULL,
					   coll_fn, &c, &env->err),
			 0);
	assert_int_equal(c.n, 0);
}

/* ---- symlinks, FIFOs and sockets ---- */

static int put_special(struct env *env, const char *key, uint32_t mode,
		       const char *content, int64_t mtime_ns)
{
	struct smux_put_opts opts = {.mode = mode, .mtime_ns = mtime_ns};
	struct smux_source src;

	smux_source_buf(&src, content, strlen(content));
	return smux_backend_put(env->b, &env->ctx, key, &src, &opts, NULL,
				&env->err);
}

static void expect_link(struct env *env, const char *rel, const char *want)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;

	assert_int_equal(lstat(at(env, rel), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	n = readlink(at(env, rel), target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, want);
}

/* A symlink is an object whose content is its target: stored as a real
 * symlink, listed, copied and renamed as one, never followed. */
static void test_symlink_objects(void **state)
{
	struct env *env = *state;
	struct smux_setattr attr = {.flags = SMUX_SET_MTIME,
				    .mtime_ns = 1500000000123456789LL};
	struct smux_reader *r = NULL;
	struct smux_writer *w = NULL;
	struct smux_info info;
	struct coll c = {0};
	struct stat st;
	unsigned flags;

	assert_int_equal(put_special(env, "esc", S_IFLNK | 0777, "../../etc",
				     1400000000000000000LL),
			 0);
	expect_link(env, "root/esc", "../../etc");
	assert_int_equal(lstat(at(env, "root/esc"), &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1400000000);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "esc", &info, &env->err),
		0);
	assert_true(S_ISLNK(info.mode));
	assert_int_equal(info.mode & 07777, 0777);
	assert_int_equal(info.size, 9);
	assert_true(info.etag[0]);
	expect_content(env, "esc", "../../etc");
	/* the link is never followed, not even as a middle component */
	expect_code(smux_backend_head(env->b, &env->ctx, "esc/passwd", &info,
				      &env->err),
		    &env->err, SMUX_E_PERMISSION_DENIED);
	assert_true(smux_backend_head(env->b, &env->ctx, "esc/", &info,
				      &env->err) < 0);
	assert_true(put_str(env, "esc/x", "pwned") < 0);
	assert_true(smux_backend_reader_open(env->b, &env->ctx, "esc", &r,
					     &env->err) < 0);
	for (flags = 0; flags <= SMUX_WRITER_TRUNC; flags++)
		assert_true(smux_backend_writer_open(env->b, &env->ctx, "esc",
						     flags, &w, &env->err) < 0);
	expect_link(env, "root/esc", "../../etc");

	/* listed as a link with the target's length */
	assert_string_equal(list(env, &c, "", NULL), "esc");
	/* copy and rename keep a link a link, with its mtime */
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "esc", "d/copy",
					   &env->err),
			 0);
	expect_link(env, "root/d/copy", "../../etc");
	assert_int_equal(lstat(at(env, "root/d/copy"), &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1400000000);
	assert_int_equal(smux_backend_rename(env->b, &env->ctx, "d/copy",
					     "moved", &env->err),
			 0);
	expect_link(env, "root/moved", "../../etc");
	assert_int_equal(lstat(at(env, "root/d/copy"), &st), -1);
	/* times change on the link itself */
	assert_int_equal(smux_backend_setattr(env->b, &env->ctx, "moved", &attr,
					      &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/moved"), &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1500000000);
	assert_int_equal(st.st_mtim.tv_nsec, 123456789);
	/* replacing a link replaces the link, never its target */
	assert_int_equal(put_special(env, "moved", S_IFLNK | 0777, "other", 0),
			 0);
	expect_link(env, "root/moved", "other");
	assert_int_equal(put_str(env, "moved", "now a file"), 0);
	assert_int_equal(lstat(at(env, "root/moved"), &st), 0);
	assert_true(S_ISREG(st.st_mode));
	expect_content(env, "moved", "now a file");
	/* delete removes the link */
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "esc", &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/esc"), &st), -1);
	assert_int_equal(lstat("/etc/passwd", &st), 0);

	/* a target must be 1 to PATH_MAX - 1 bytes */
	assert_true(put_special(env, "bad", S_IFLNK | 0777, "", 0) < 0);
	assert_int_equal(lstat(at(env, "root/bad"), &st), -1);
}

static void test_fifo_objects(void **state)
{
	struct env *env = *state;
	struct smux_info info;
	struct stat st;

	assert_int_equal(put_special(env, "p/fifo", S_IFIFO | 0640, "", 0), 0);
	assert_int_equal(lstat(at(env, "root/p/fifo"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(smux_backend_head(env->b, &env->ctx, "p/fifo", &info,
					   &env->err),
			 0);
	assert_true(S_ISFIFO(info.mode));
	assert_int_equal(info.size, 0);
	expect_content(env, "p/fifo", "");
	assert_int_equal(put_special(env, "sock", S_IFSOCK | 0600, "", 0), 0);
	assert_int_equal(lstat(at(env, "root/sock"), &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(smux_backend_copy(env->b, &env->ctx, "p/fifo", "fifo2",
					   &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/fifo2"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(smux_backend_setattr(
				 env->b, &env->ctx, "fifo2",
				 &(struct smux_setattr){.flags = SMUX_SET_MODE,
							.mode = 0604},
				 &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/fifo2"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	/* a FIFO takes no content */
	assert_true(put_special(env, "full", S_IFIFO | 0600, "x", 0) < 0);
	assert_int_equal(
		smux_backend_del(env->b, &env->ctx, "p/fifo", &env->err), 0);
	assert_int_equal(smux_backend_del(env->b, &env->ctx, "sock", &env->err),
			 0);
	assert_int_equal(lstat(at(env, "root/sock"), &st), -1);
}

/* A directory renames with one rename(2): the tree keeps its inodes. */
static void test_rename_dir(void **state)
{
	struct env *env = *state;
	struct stat before, after;

	assert_true(smux_backend_caps(env->b) & SMUX_CAP_DIR_RENAME);
	assert_int_equal(put_str(env, "a/x", "1"), 0);
	assert_int_equal(put_str(env, "a/sub/y", "2"), 0);
	assert_int_equal(put_special(env, "a/ln", S_IFLNK | 0777, "x", 0), 0);
	assert_int_equal(stat(at(env, "root/a/sub/y"), &before), 0);
	assert_int_equal(
		smux_backend_rename(env->b, &env->ctx, "a/", "n/b/", &env->err),
		0);
	assert_int_equal(stat(at(env, "root/n/b/sub/y"), &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
	assert_int_equal(lstat(at(env, "root/a"), &after), -1);
	expect_content(env, "n/b/x", "1");
	expect_link(env, "root/n/b/ln", "x");
	/* onto an empty directory: replaced; a full one: NOT_EMPTY */
	assert_int_equal(put_str(env, "e/", ""), 0);
	assert_int_equal(
		smux_backend_rename(env->b, &env->ctx, "n/b/", "e/", &env->err),
		0);
	expect_content(env, "e/sub/y", "2");
	assert_int_equal(put_str(env, "f/z", "3"), 0);
	expect_code(
		smux_backend_rename(env->b, &env->ctx, "f/", "e/", &env->err),
		&env->err, SMUX_E_NOT_EMPTY);
	/* a file is no directory; a missing one is not found; never into
	 * itself; a directory key onto an object key is refused */
	expect_code(
		smux_backend_rename(env->b, &env->ctx, "f/", "e/x/", &env->err),
		&env->err, SMUX_E_NOT_DIRECTORY);
	expect_code(smux_backend_rename(env->b, &env->ctx, "nope/", "q/",
					&env->err),
		    &env->err, SMUX_E_KEY_NOT_FOUND);
	assert_true(smux_backend_rename(env->b, &env->ctx, "f/", "f/in/",
					&env->err) < 0);
	expect_code(
		smux_backend_rename(env->b, &env->ctx, "f/", "g", &env->err),
		&env->err, SMUX_E_INVALID_ARGUMENT);
	expect_content(env, "f/z", "3");
}

/* exchange (renameat2 RENAME_EXCHANGE): two names swap what they hold,
 * each keeping its inode, in any pairing of files and directories; one
 * name holding nothing takes the other's object alone (its parents
 * made); neither is not found. */
static void test_exchange(void **state)
{
	struct env *env = *state;
	struct stat a0, b0, st;

	assert_true(smux_backend_caps(env->b) & SMUX_CAP_EXCHANGE);
	assert_int_equal(put_str(env, "a", "A"), 0);
	assert_int_equal(put_str(env, "d/b", "B"), 0);
	assert_int_equal(stat(at(env, "root/a"), &a0), 0);
	assert_int_equal(stat(at(env, "root/d/b"), &b0), 0);
	assert_int_equal(
		smux_backend_exchange(env->b, &env->ctx, "a", "d/b", &env->err),
		0);
	expect_content(env, "a", "B");
	expect_content(env, "d/b", "A");
	assert_int_equal(stat(at(env, "root/a"), &st), 0);
	assert_int_equal(st.st_ino, b0.st_ino);
	assert_int_equal(stat(at(env, "root/d/b"), &st), 0);
	assert_int_equal(st.st_ino, a0.st_ino);
	/* a file and a directory with its tree */
	assert_int_equal(put_str(env, "t/x", "X"), 0);
	assert_int_equal(put_special(env, "t/ln", S_IFLNK | 0777, "x", 0), 0);
	assert_int_equal(
		smux_backend_exchange(env->b, &env->ctx, "t", "a", &env->err),
		0);
	expect_content(env, "a/x", "X");
	expect_link(env, "root/a/ln", "x");
	expect_content(env, "t", "B");
	/* only one name holds something: it moves, parents made */
	assert_int_equal(smux_backend_exchange(env->b, &env->ctx, "t", "n/e/w",
					       &env->err),
			 0);
	expect_content(env, "n/e/w", "B");
	assert_int_equal(lstat(at(env, "root/t"), &st), -1);
	assert_int_equal(smux_backend_exchange(env->b, &env->ctx, "t", "n/e/w",
					       &env->err),
			 0);
	expect_content(env, "t", "B");
	expect_code(
		smux_backend_exchange(env->b, &env->ctx, "no", "pe", &env->err),
		&env->err, SMUX_E_KEY_NOT_FOUND);
	/* never a directory into its own tree */
	assert_true(smux_backend_exchange(env->b, &env->ctx, "a", "a/x",
					  &env->err) < 0);
	expect_content(env, "a/x", "X");
	expect_code(
		smux_backend_exchange(env->b, &env->ctx, "a/", "t", &env->err),
		&env->err, SMUX_E_INVALID_KEY);
}

/* info.file_id: one for every name of a file (a hard link), another for
 * another file, the same through a reader, and kept across a rename. */
static void test_file_id(void **state)
{
	struct env *env = *state;
	struct smux_info a, b, c;
	struct smux_reader *r = NULL;

	assert_int_equal(put_str(env, "a", "1"), 0);
	assert_int_equal(put_str(env, "c", "1"), 0);
	assert_int_equal(
		smux_backend_link(env->b, &env->ctx, "a", "d/b", &env->err), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "a", &a, &env->err), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "d/b", &b, &env->err), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "c", &c, &env->err), 0);
	assert_true(a.file_id != 0);
	assert_true(a.file_id == b.file_id);
	assert_true(a.file_id != c.file_id);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(smux_backend_reader_open(env->b, &env->ctx, "d/b", &r,
						  &env->err),
			 0);
	assert_true(r->info.file_id == a.file_id);
	smux_reader_close(r);
	assert_int_equal(
		smux_backend_rename(env->b, &env->ctx, "a", "e", &env->err), 0);
	assert_int_equal(
		smux_backend_head(env->b, &env->ctx, "e", &b, &env->err), 0);
	assert_true(b.file_id == a.file_id);
}

int main(void)
{
	const struct CMUnitTest basics[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_failure_cleans_up,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranged_get, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_markers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_times, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reader, setup, teardown),
		cmocka_unit_test_setup_teardown(test_health_statfs_new, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_work_folder, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_work_sweep, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_work_readonly_root, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
	};
	const struct CMUnitTest listing[] = {
		cmocka_unit_test_setup_teardown(test_list_order, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_list_random, setup_fast,
						teardown),
	};
	const struct CMUnitTest writer[] = {
		cmocka_unit_test_setup_teardown(test_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_inplace, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dir_fsync_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_concurrent_readers,
						setup, teardown),
	};
	const struct CMUnitTest security[] = {
		cmocka_unit_test_setup_teardown(test_containment, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_containment_list,
						setup_fast, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_objects,
						setup_fast, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_objects, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_file_id, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_exchange, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_rename_dir, setup_fast,
						teardown),
		cmocka_unit_test_setup_teardown(test_xattr, setup_fast,
						teardown),
	};
	int fails = 0;

	fails += cmocka_run_group_tests_name("file_basics", basics, NULL, NULL);
	fails += cmocka_run_group_tests_name("file_list", listing, NULL, NULL);
	fails += cmocka_run_group_tests_name("file_writer", writer, NULL, NULL);
	fails += cmocka_run_group_tests_name("file_security", security, NULL,
					     NULL);
	return fails ? 1 : 0;
}
