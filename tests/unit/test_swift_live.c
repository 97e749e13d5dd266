// SPDX-License-Identifier: MIT
/*
 * test_swift_live.c - the swift backend against a real OpenStack Swift
 * (tests/servers/swift.sh, tempauth) and the identity v2.0 emulator in
 * front of it (tests/servers/swift_identity.py), both started once for the
 * process (support/swift_server.h): object calls and paged listings on
 * tempauth, then identity v2.0: the default region, an internal endpoint,
 * a region without an endpoint, password credentials, renewal after a
 * revoked token and before expiry, CREDENTIAL_EXPIRED when the renewal is
 * refused, 429/503 retried, and listings that lag behind own writes. The
 * whole conformance suite runs on both in `make check-swift`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smux/swift.h"
#include "support/swift_server.h"

static struct ts_swift srv;
static unsigned seq;

static int group_setup(void **state)
{
	(void)state;
	return ts_swift_start(&srv) == 0 ? 0 : -1;
}

static void reset_knobs(void)
{
	assert_int_equal(
		ts_swift_control("{\"lifetime\":3600,\"refuse_auth\":false,"
				 "\"default_region\":\"ORD\",\"listing\":null}",
				 NULL, 0),
		0);
}

/* A v1 (tempauth) backend on @o's container, test:tester's unless @o
 * names a user. */
static struct smux_backend *v1_with(struct smux_swift_opts *o)
{
	struct smux_error err = {0};
	struct smux_backend *b = NULL;

	o->auth_url = srv.auth_v1;
	if (!o->username) {
		o->username = srv.user_v1;
		o->key = srv.key_v1;
	}
	if (smux_swift_new("sw", o, &b, &err) != 0)
		fail_msg("swift_new: %s", err.e.message);
	return b;
}

/* A v1 (tempauth) backend on a fresh container. */
static struct smux_backend *v1_new(unsigned list_page)
{
	struct smux_swift_opts o = {0};
	char container[64];

	snprintf(container, sizeof(container), "t-%d-%u", (int)getpid(), ++seq);
	o.container = container;
	o.list_page = list_page;
	return v1_with(&o);
}

/* The container of the backend v1_new made last. */
static const char *last_container(char buf[64])
{
	snprintf(buf, 64, "t-%d-%u", (int)getpid(), seq);
	return buf;
}

/* A v2 backend through the emulator; fills *@err when it cannot open. */
static struct smux_backend *v2_new(const char *region, bool internal,
				   bool password)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;
	char container[64];

	snprintf(container, sizeof(container), "t2-%d-%u", (int)getpid(),
		 ++seq);
	o.auth = SMUX_SWIFT_AUTH_V2;
	o.auth_url = srv.identity;
	o.username = TS_SWIFT_V2_USER;
	if (password)
		o.password = TS_SWIFT_V2_PASSWORD;
	else
		o.key = TS_SWIFT_V2_APIKEY;
	o.region = region;
	o.internal = internal;
	o.container = container;
	o.max_attempts = 4;
	if (smux_swift_new("sw2", &o, &b, &err) != 0)
		fail_msg("swift_new: %s", err.e.message);
	return b;
}

static int put_str(struct smux_backend *b, const char *key, const char *v,
		   struct smux_error *err)
{
	struct smux_source src;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	smux_source_buf(&src, v, strlen(v));
	return smux_backend_put(b, &ctx, key, &src, NULL, NULL, err);
}

/* get of [off, off+len) into @out (cap bytes, NUL-terminated). */
static int get_str(struct smux_backend *b, const char *key, uint64_t off,
		   uint64_t len, const char *if_match, char *out, size_t cap,
		   struct smux_error *err)
{
	struct smux_get_opts go = {
		.offset = off, .length = len, .if_match = if_match};
	struct smux_sink sink;
	struct smux_ctx ctx;
	int rc;

	smux_ctx_init(&ctx);
	smux_sink_buf(&sink, out, cap - 1);
	rc = smux_backend_get(b, &ctx, key, &go, &sink, NULL, err);
	out[rc == 0 ? sink.written : 0] = '\0';
	return rc;
}

struct listing {
	char keys[64][128];
	bool prefix[64];
	size_t n;
};

static int on_entry(void *arg, const struct smux_list_entry *e)
{
	struct listing *l = arg;

	if (l->n < 64) {
		snprintf(l->keys[l->n], sizeof(l->keys[0]), "%s", e->key);
		l->prefix[l->n++] = e->is_prefix;
	}
	return 0;
}

static void list(struct smux_backend *b, const char *prefix, const char *d,
		 struct listing *l)
{
	struct smux_error err = {0};
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	memset(l, 0, sizeof(*l));
	if (smux_backend_list(b, &ctx, prefix, d, on_entry, l, &err) != 0)
		fail_msg("list: %s", err.e.message);
}

static unsigned long storage_count(const char *label)
{
	char ans[1024], pat[64], *p;

	assert_int_equal(ts_swift_control(NULL, ans, sizeof(ans)), 0);
	snprintf(pat, sizeof(pat), "\"%s\": ", label);
	p = strstr(ans, pat);
	return p ? strtoul(p + strlen(pat), NULL, 10) : 0;
}

/* ---- tempauth ---- */

static void test_v1_objects(void **state)
{
	struct smux_backend *b = v1_new(0);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned char md[16];
	unsigned mdlen = 0;
	char buf[64], hex[33];

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(put_str(b, "a/b/c", "hello world", &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "a/b/c", &info, &err), 0);
	assert_int_equal(info.size, 11);
	/* the version token is the content MD5 the server verified */
	EVP_Digest("hello world", 11, md, &mdlen, EVP_md5(), NULL);
	for (unsigned i = 0; i < 16; i++)
		snprintf(hex + (size_t)2 * i, 3, "%02x", md[i]);
	assert_string_equal(info.etag, hex);
	assert_int_equal(
		get_str(b, "a/b/c", 6, 5, NULL, buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "world");
	assert_int_equal(get_str(b, "a/b/c", 0, SMUX_LEN_ALL, hex, buf,
				 sizeof(buf), &err),
			 0);
	assert_string_equal(buf, "hello world");
	/* a pinned get of another version writes nothing */
	assert_int_equal(get_str(b, "a/b/c", 0, SMUX_LEN_ALL,
				 "0123456789abcdef0123456789abcdef", buf,
				 sizeof(buf), &err),
			 -smux_code_errno(SMUX_E_PRECONDITION_FAILED));
	assert_int_equal(err.e.code, SMUX_E_PRECONDITION_FAILED);
	/* implied directories */
	assert_int_equal(smux_backend_head(b, &ctx, "a/b", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
	assert_int_equal(get_str(b, "a/b", 0, SMUX_LEN_ALL, NULL, buf,
				 sizeof(buf), &err),
			 -EISDIR);
	/* server-side copy and rename */
	assert_int_equal(smux_backend_rename(b, &ctx, "a/b/c", "x", &err), 0);
	assert_int_equal(
		get_str(b, "x", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	assert_string_equal(buf, "hello world");
	assert_int_equal(smux_backend_head(b, &ctx, "a/b/c", &info, &err),
			 -ENOENT);
	assert_int_equal(smux_backend_del(b, &ctx, "x", &err), 0);
	assert_int_equal(smux_backend_del(b, &ctx, "x", &err), 0);
	smux_backend_unref(b);
}

static void test_v1_list_pages(void **state)
{
	struct smux_backend *b = v1_new(2); /* pages of two */
	static const char *const keys[] = {"d/1",   "d/2",  "d/3",
					   "d/e/1", "d/f/", "z"};
	struct smux_error err = {0};
	struct listing l;

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(
			put_str(b, keys[i],
				keys[i][strlen(keys[i]) - 1] == '/' ? "" : "v",
				&err),
			0);
	list(b, "d/", "/", &l);
	assert_int_equal(l.n, 5);
	assert_string_equal(l.keys[0], "d/1");
	assert_string_equal(l.keys[3], "d/e/");
	assert_true(l.prefix[3]);
	assert_string_equal(l.keys[4], "d/f/");
	assert_true(l.prefix[4]);
	list(b, "", NULL, &l);
	assert_int_equal(l.n, 6);
	assert_string_equal(l.keys[4], "d/f/"); /* an empty dir's marker */
	assert_string_equal(l.keys[5], "z");
	smux_backend_unref(b);
}

static void test_v1_wrong_key(void **state)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;
	char buf[8];

	(void)state;
	o.auth_url = srv.auth_v1;
	o.username = srv.user_v1;
	o.key = "not-the-key";
	o.container = "wrong";
	assert_int_equal(smux_swift_new("sw", &o, &b, &err), 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		-EACCES);
	assert_int_equal(err.e.code, SMUX_E_CREDENTIAL_EXPIRED);
	assert_null(strstr(err.e.message, "not-the-key"));
	smux_backend_unref(b);
}

/* chmod/touch/chown are one POST of the metadata: the content (and its
 * etag) stays; a directory without a marker gets one */
static void test_setattr_post(void **state)
{
	struct smux_backend *b = v1_new(0);
	struct smux_setattr sa = {.flags = SMUX_SET_MODE | SMUX_SET_MTIME |
					   SMUX_SET_OWNER,
				  .mode = 0600,
				  .mtime_ns = 1234567890123456789LL,
				  .uid = 4242,
				  .gid = SMUX_ID_NONE};
	struct smux_error err = {0};
	struct smux_info before, after;
	struct smux_ctx ctx;
	char buf[16];

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(put_str(b, "f", "content", &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "f", &before, &err), 0);
	assert_int_equal(smux_backend_setattr(b, &ctx, "f", &sa, &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "f", &after, &err), 0);
	assert_int_equal(after.mode, S_IFREG | 0600);
	assert_int_equal(after.mtime_ns, sa.mtime_ns);
	assert_true(after.has_owner);
	assert_int_equal(after.uid, 4242);
	assert_string_equal(after.etag, before.etag);
	assert_int_equal(
		get_str(b, "f", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	assert_string_equal(buf, "content");
	/* an implied directory */
	assert_int_equal(put_str(b, "dd/x", "x", &err), 0);
	sa.flags = SMUX_SET_MODE;
	sa.mode = 0700;
	assert_int_equal(smux_backend_setattr(b, &ctx, "dd/", &sa, &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "dd/", &after, &err), 0);
	assert_int_equal(after.mode, S_IFDIR | 0700);
	assert_int_equal(smux_backend_setattr(b, &ctx, "none", &sa, &err),
			 -ENOENT);
	smux_backend_unref(b);
}

/* ---- many deletes ---- */

static const char *const many[] = {"m/a", "m/sp ace", "m/\xc3\xbc+&~'\"",
				   "m/pct%41%2F", "m/deep/er/x"};
#define N_MANY (sizeof(many) / sizeof(many[0]))

static void put_many(struct smux_backend *b)
{
	struct smux_error err = {0};

	for (size_t i = 0; i < N_MANY; i++)
		if (put_str(b, many[i], "v", &err) != 0)
			fail_msg("put %s: %s", many[i], err.e.message);
}

static void expect_gone(struct smux_backend *b, const char *const *keys,
			size_t n)
{
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (size_t i = 0; i < n; i++)
		if (smux_backend_head(b, &ctx, keys[i], &info, &err) != -ENOENT)
			fail_msg("%s is still there", keys[i]);
}

/*
 * del_many of keys the backend put itself (seen plain objects) is one
 * bulk delete for all of them, but for a key whose escaped path is longer
 * than a bulk-delete line may be (Swift would refuse the whole request):
 * that one is a DELETE alone. A backend that knows nothing of the keys
 * deletes each alone (its HEAD looks for a large object's segments), no
 * bulk delete. Either way every key is gone.
 */
static void test_v1_del_many(void **state)
{
	struct smux_swift_opts o = {0};
	struct smux_backend *b = v1_new(0), *other;
	struct smux_error err = {0};
	const char *keys[N_MANY + 1];
	char container[64], longkey[1024];
	struct smux_ctx ctx;
	unsigned long bulk0;
	int rcs[N_MANY + 1];
	size_t len;

	(void)state;
	smux_ctx_init(&ctx);
	assert_true(smux_backend_caps(b) & SMUX_CAP_DEL_MANY);
	/* "m" and 4 segments of 120 u-umlauts: 965 bytes, 2885 escaped */
	len = 0;
	longkey[len++] = 'm';
	for (size_t i = 0; i < 480; i++) {
		if (i % 120 == 0)
			longkey[len++] = '/';
		memcpy(longkey + len, "\xc3\xbc", 2);
		len += 2;
	}
	longkey[len] = '\0';
	for (size_t i = 0; i < N_MANY; i++)
		keys[i] = many[i];
	keys[N_MANY] = longkey;
	put_many(b);
	assert_int_equal(put_str(b, longkey, "v", &err), 0);
	bulk0 = smux_swift_bulk_count(b);
	if (smux_backend_del_many(b, &ctx, keys, N_MANY + 1, rcs, &err) != 0)
		fail_msg("del_many: %s", err.e.message);
	assert_int_equal(smux_swift_bulk_count(b), bulk0 + 1);
	for (size_t i = 0; i < N_MANY + 1; i++)
		assert_int_equal(rcs[i], 0);
	expect_gone(b, keys, N_MANY + 1);

	put_many(b);
	o.container = last_container(container);
	other = v1_with(&o);
	if (smux_backend_del_many(other, &ctx, many, N_MANY, rcs, &err) != 0)
		fail_msg("del_many: %s", err.e.message);
	assert_int_equal(smux_swift_bulk_count(other), 0);
	for (size_t i = 0; i < N_MANY; i++)
		assert_int_equal(rcs[i], 0);
	expect_gone(other, many, N_MANY);
	expect_gone(b, many, N_MANY);
	smux_backend_unref(other);
	smux_backend_unref(b);
}

static int count_entry(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(size_t *)arg)++;
	return 0;
}

/* Polls (up to 20 s: Swift updates a container listing after the write)
 * until "<container>_segments" lists @want objects. */
static void expect_segments(const char *container, size_t want)
{
	struct smux_swift_opts o = {0};
	struct smux_backend *b;
	struct smux_error err = {0};
	struct smux_ctx ctx;
	char seg[80];
	size_t n = 0;

	snprintf(seg, sizeof(seg), "%s_segments", container);
	o.container = seg;
	o.recent_ms = -1; /* what the server lists */
	b = v1_with(&o);
	smux_ctx_init(&ctx);
	for (int i = 0; i < 200; i++) {
		int rc;

		n = 0;
		rc = smux_backend_list(b, &ctx, "", NULL, count_entry, &n,
				       &err);
		if (rc != 0 && rc != -ENOENT)
			fail_msg("list %s: %s", seg, err.e.message);
		if (n == want)
			break;
		usleep(100 * 1000);
	}
	smux_backend_unref(b);
	if (n != want)
		fail_msg("%zu segments, not %zu", n, want);
}

/* A large object (SLO) among the keys of a del_many goes alone, with
 * its segments; the plain ones around it go in one bulk delete. */
static void test_v1_del_many_slo(void **state)
{
	static const char *const keys[] = {"p/1", "big", "p/2", "p/3"};
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b;
	struct smux_source src;
	struct smux_ctx ctx;
	unsigned long bulk0;
	char container[64], *big = malloc(100000);
	int rcs[4];

	(void)state;
	assert_non_null(big);
	smux_ctx_init(&ctx);
	snprintf(container, sizeof(container), "t-%d-%u", (int)getpid(), ++seq);
	o.container = container;
	o.segment_threshold = (uint64_t)40 * 1024;
	o.segment_size = (uint64_t)24 * 1024;
	b = v1_with(&o);
	for (size_t i = 0; i < 100000; i++)
		big[i] = (char)(i * 7 + i / 1000);
	smux_source_buf(&src, big, 100000);
	assert_int_equal(
		smux_backend_put(b, &ctx, "big", &src, NULL, NULL, &err), 0);
	expect_segments(container, 5);
	for (size_t i = 0; i < 4; i++)
		if (i != 1)
			assert_int_equal(put_str(b, keys[i], "small", &err), 0);
	bulk0 = smux_swift_bulk_count(b);
	if (smux_backend_del_many(b, &ctx, keys, 4, rcs, &err) != 0)
		fail_msg("del_many: %s", err.e.message);
	assert_int_equal(smux_swift_bulk_count(b), bulk0 + 1);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(rcs[i], 0);
	expect_gone(b, keys, 4);
	expect_segments(container, 0);
	assert_int_equal(smux_swift_orphan_count(b), 0);
	free(big);
	smux_backend_unref(b);
}

/*
 * A user who may read the container but not write it (TS_SWIFT_READER_*)
 * deletes: Swift answers the bulk delete 200 with each object's 403 in
 * "Errors", its path quoted again; each key fails with EACCES, the error
 * names the key as it was sent (keys that need quoting: the quoted path
 * was matched back), and nothing is deleted. A key the reader never saw
 * (a HEAD, then listed) goes alone, refused all the same.
 */
static void test_v1_del_many_refused(void **state)
{
	/* all quoted on the wire */
	const char *keys[] = {many[1], many[2], many[3], "m/unseen"};
	struct smux_swift_opts o = {0};
	struct smux_backend *b = v1_new(0), *reader;
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	char container[64], args[512], want[128];
	unsigned long bulk0;
	bool named = false;
	struct listing l;
	int rcs[4], rc;

	(void)state;
	smux_ctx_init(&ctx);
	put_many(b);
	assert_int_equal(put_str(b, "m/unseen", "v", &err), 0);
	last_container(container);
	snprintf(args, sizeof(args),
		 "swift -q -A '%s' -U '%s' -K '%s' post -r '%s' '%s'",
		 srv.auth_v1, srv.user_v1, srv.key_v1, TS_SWIFT_READER_USER,
		 container);
	assert_int_equal(system(args), 0);
	o.container = container;
	o.username = TS_SWIFT_READER_USER;
	o.key = TS_SWIFT_READER_KEY;
	reader = v1_with(&o);
	for (size_t i = 0; i < 3; i++) {
		/* versions it knows, then listed: seen plain objects, they
		 * go in the bulk delete */
		if (smux_backend_head(reader, &ctx, keys[i], &info, &err) != 0)
			fail_msg("head %s: %s", keys[i], err.e.message);
	}
	list(reader, "m/", NULL, &l);
	assert_int_equal(l.n, N_MANY + 1);
	bulk0 = smux_swift_bulk_count(reader);
	rc = smux_backend_del_many(reader, &ctx, keys, 4, rcs, &err);
	assert_int_equal(rc, -EACCES);
	assert_int_equal(smux_swift_bulk_count(reader), bulk0 + 1);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(rcs[i], -EACCES);
	assert_int_equal(err.e.http_status, 403);
	for (size_t i = 0; i < 3 && !named; i++) {
		snprintf(want, sizeof(want), "\"/%s/%s\"", container, keys[i]);
		named = strstr(err.e.message, want) != NULL;
	}
	if (!named)
		fail_msg("\"%s\" names none of the keys as sent",
			 err.e.message);
	print_message("  refused: %s\n", err.e.message);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(
			smux_backend_head(b, &ctx, keys[i], &info, &err), 0);
	/* the owner may */
	assert_int_equal(smux_backend_del_many(b, &ctx, keys, 4, rcs, &err), 0);
	expect_gone(b, keys, 4);
	smux_backend_unref(reader);
	smux_backend_unref(b);
}

/* ---- identity v2.0 ---- */

static void test_v2_default_region(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	unsigned long ord = storage_count("ORD-public");
	char buf[16];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(put_str(b, "k", "v2", &err), 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	assert_string_equal(buf, "v2");
	/* the user's RAX-AUTH:defaultRegion (ORD), public endpoint */
	assert_true(storage_count("ORD-public") > ord);
	smux_backend_unref(b);
}

static void test_v2_internal_password(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	unsigned long n = storage_count("DFW-internal");

	(void)state;
	reset_knobs();
	b = v2_new("DFW", true, true);
	assert_int_equal(put_str(b, "k", "x", &err), 0);
	assert_true(storage_count("DFW-internal") > n);
	smux_backend_unref(b);
}

static void test_v2_no_endpoint(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};

	(void)state;
	reset_knobs();
	b = v2_new("SYD", false, false);
	assert_int_equal(put_str(b, "k", "x", &err),
			 -smux_code_errno(SMUX_E_INVALID_OPTIONS));
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	assert_non_null(strstr(err.e.message, "\"SYD\""));
	assert_non_null(strstr(err.e.message, "DFW, ORD"));
	smux_backend_unref(b);
	/* no region and no default region: says to set one */
	assert_int_equal(ts_swift_control("{\"default_region\":\"\"}", NULL, 0),
			 0);
	b = v2_new(NULL, false, false);
	assert_int_equal(put_str(b, "k", "x", &err),
			 -smux_code_errno(SMUX_E_INVALID_OPTIONS));
	assert_non_null(strstr(err.e.message, "set region"));
	smux_backend_unref(b);
	reset_knobs();
}

static void test_v2_revoked_token(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	char buf[16];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(put_str(b, "k", "one", &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 1);
	/* the token dies mid-run: the next call authenticates once more and
	 * fails nothing */
	assert_int_equal(ts_swift_control("{\"revoke\":true}", NULL, 0), 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	assert_string_equal(buf, "one");
	assert_int_equal(smux_swift_auth_count(b), 2);
	/* revoked again and the service refuses: CREDENTIAL_EXPIRED */
	assert_int_equal(ts_swift_control("{\"revoke\":true,"
					  "\"refuse_auth\":true}",
					  NULL, 0),
			 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		-EACCES);
	assert_int_equal(err.e.code, SMUX_E_CREDENTIAL_EXPIRED);
	assert_string_equal(smux_code_name(err.e.code),
			    "STORAGE_CDN.CREDENTIAL_EXPIRED");
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_SEMANTIC);
	assert_true(err.has_cause);
	assert_int_equal(err.cause.http_status, 401);
	assert_null(strstr(err.e.message, TS_SWIFT_V2_APIKEY));
	smux_backend_unref(b);
	reset_knobs();
}

static void test_v2_renew_before_expiry(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned long n;

	(void)state;
	reset_knobs();
	/* tokens live 30 s, renewed 60 s before expiry: every call renews
	 * first, so none meets an expired token */
	assert_int_equal(ts_swift_control("{\"lifetime\":30}", NULL, 0), 0);
	b = v2_new(NULL, false, false);
	smux_ctx_init(&ctx);
	assert_int_equal(put_str(b, "k", "x", &err), 0);
	n = smux_swift_auth_count(b);
	assert_true(n >= 1);
	assert_int_equal(smux_backend_head(b, &ctx, "k", &info, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), n + 1);
	smux_backend_unref(b);
	reset_knobs();
}

static void test_v2_throttled(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	char buf[16];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(put_str(b, "k", "ok", &err), 0);
	assert_int_equal(ts_swift_control("{\"fail\":{\"status\":429,"
					  "\"count\":2,\"retry_after\":0}}",
					  NULL, 0),
			 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	assert_string_equal(buf, "ok");
	assert_int_equal(ts_swift_control("{\"fail\":{\"status\":503,"
					  "\"count\":1,\"target\":\"auth\"}}",
					  NULL, 0),
			 0);
	assert_int_equal(ts_swift_control("{\"revoke\":true}", NULL, 0), 0);
	assert_int_equal(
		get_str(b, "k", 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf), &err),
		0);
	smux_backend_unref(b);
}

struct worker {
	struct smux_backend *b;
	int id;
	int failures;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct smux_error err = {0};
	char key[32], val[32], buf[32];

	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "w%d/k%d", w->id, i);
		snprintf(val, sizeof(val), "v%d-%d", w->id, i);
		if (put_str(w->b, key, val, &err) != 0 ||
		    get_str(w->b, key, 0, SMUX_LEN_ALL, NULL, buf, sizeof(buf),
			    &err) != 0 ||
		    strcmp(buf, val) != 0)
			w->failures++;
	}
	return NULL;
}

/* Threads share one token; a revocation in the middle of their run costs
 * renewals, never a failed call (a 401 drops only the token it was
 * answered for: the threads that saw it renew once between them). */
static void test_v2_threads_share_token(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	struct worker w[4];
	pthread_t t[4];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(put_str(b, "first", "x", &err), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.b = b, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	assert_int_equal(ts_swift_control("{\"revoke\":true}", NULL, 0), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	/* the first token, and at most one renewal per revocation */
	assert_true(smux_swift_auth_count(b) <= 2);
	smux_backend_unref(b);
}

/* A listing that lags (eventual consistency) still shows own writes and
 * hides own deletes. */
static void test_v2_stale_listing(void **state)
{
	struct smux_backend *b;
	struct smux_error err = {0};
	struct smux_ctx ctx;
	struct listing l;

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	smux_ctx_init(&ctx);
	assert_int_equal(put_str(b, "old", "o", &err), 0);
	assert_int_equal(ts_swift_control("{\"listing\":\"[]\"}", NULL, 0), 0);
	assert_int_equal(put_str(b, "dir/new", "n", &err), 0);
	list(b, "", "/", &l);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[0], "dir/");
	assert_true(l.prefix[0]);
	assert_string_equal(l.keys[1], "old");
	list(b, "", NULL, &l);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[0], "dir/new");
	/* deleted, but the listing still has it */
	assert_int_equal(smux_backend_del(b, &ctx, "old", &err), 0);
	assert_int_equal(
		ts_swift_control(
			"{\"listing\":\"[{\\\"name\\\":\\\"old\\\","
			"\\\"bytes\\\":1,\\\"hash\\\":\\\"x\\\","
			"\\\"last_modified\\\":\\\"2026-01-01T00:00:00.5\\\","
			"\\\"content_type\\\":\\\"text/plain\\\"}]\"}",
			NULL, 0),
		0);
	list(b, "", NULL, &l);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.keys[0], "dir/new");
	smux_backend_unref(b);
	reset_knobs();
}

/* The info of key "dst" in a listing. */
static int find_dst(void *arg, const struct smux_list_entry *e)
{
	if (strcmp(e->key, "dst") == 0)
		*(struct smux_info *)arg = e->info;
	return 0;
}

/*
 * A renamed object's info is the source's (its metadata is copied) with
 * the copy's ETag, noted without a HEAD after the copy: a listing that
 * lags behind shows it with its size, mtime and etag.
 */
static void test_v2_rename_noted(void **state)
{
	struct smux_put_opts po = {.mode = S_IFREG | 0640,
				   .mtime_ns = 1234500000000LL,
				   .flags = SMUX_PUT_MODE};
	struct smux_backend *b;
	struct smux_error err = {0};
	struct smux_source src;
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned char md[16];
	unsigned mdlen = 0;
	char hex[33];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	smux_ctx_init(&ctx);
	smux_source_buf(&src, "renamed", 7);
	assert_int_equal(
		smux_backend_put(b, &ctx, "src", &src, &po, NULL, &err), 0);
	assert_int_equal(ts_swift_control("{\"listing\":\"[]\"}", NULL, 0), 0);
	assert_int_equal(smux_backend_rename(b, &ctx, "src", "dst", &err), 0);
	smux_info_clear(&info);
	assert_int_equal(
		smux_backend_list(b, &ctx, "", NULL, find_dst, &info, &err), 0);
	EVP_Digest("renamed", 7, md, &mdlen, EVP_md5(), NULL);
	for (unsigned i = 0; i < 16; i++)
		snprintf(hex + (size_t)2 * i, 3, "%02x", md[i]);
	assert_string_equal(info.etag, hex);
	assert_int_equal(info.size, 7);
	assert_int_equal(info.mtime_ns, 1234500000000LL);
	/* what the server says of it (a listing's mode is 0: unknown) */
	assert_int_equal(smux_backend_head(b, &ctx, "dst", &info, &err), 0);
	assert_string_equal(info.etag, hex);
	assert_int_equal(info.mode, S_IFREG | 0640);
	assert_int_equal(info.mtime_ns, 1234500000000LL);
	smux_backend_unref(b);
	reset_knobs();
}

static void test_bad_options(void **state)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;

	(void)state;
	o.auth_url = "ftp://x/";
	o.username = "u";
	o.key = "k";
	o.container = "c";
	assert_true(smux_swift_new("sw", &o, &b, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	assert_non_null(strstr(err.e.message, "auth_url"));
	o.auth_url = "http://127.0.0.1:1/auth/v1.0";
	o.container = "a/b";
	assert_true(smux_swift_new("sw", &o, &b, &err) < 0);
	assert_non_null(strstr(err.e.message, "container"));
	o.container = "c";
	o.key = NULL;
	assert_true(smux_swift_new("sw", &o, &b, &err) < 0);
	assert_null(b);
}

/* ---- python-swiftclient ---- */

/* Runs `swift ARGS` (python3-swiftclient) on tempauth in @cwd. */
static int swift_cli(const char *cwd, const char *args)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && swift -q -A '%s' -U '%s' -K '%s' %s "
		 ">/dev/null",
		 cwd, srv.auth_v1, srv.user_v1, srv.key_v1, args);
	return system(cmd);
}

static void write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* What `swift upload` stores (nested pseudo-directories, an empty
 * directory's marker, a segmented large object) lists and reads right;
 * what the backend stores, `swift download` reads back byte for byte. */
static void test_swiftclient_interop(void **state)
{
	struct smux_backend *b = v1_new(3);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	struct listing l;
	char tmp[] = "/tmp/smux-swcli-XXXXXX", path[256], args[512];
	char big[3000], buf[3100], container[64];

	(void)state;
	smux_ctx_init(&ctx);
	assert_non_null(mkdtemp(tmp));
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + (i * 7) % 26);
	snprintf(path, sizeof(path), "%s/d", tmp);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/d/sub", tmp);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/d/empty", tmp);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/d/a.txt", tmp);
	write_file(path, "alpha", 5);
	snprintf(path, sizeof(path), "%s/d/sub/b.txt", tmp);
	write_file(path, "beta", 4);
	snprintf(path, sizeof(path), "%s/big.bin", tmp);
	write_file(path, big, sizeof(big));
	/* the backend's container: make it with a first put */
	assert_int_equal(put_str(b, "mine", "written by smux", &err), 0);
	snprintf(container, sizeof(container), "t-%d-%u", (int)getpid(), seq);
	snprintf(args, sizeof(args), "upload %s d", container);
	assert_int_equal(swift_cli(tmp, args), 0);
	snprintf(args, sizeof(args),
		 "upload --use-slo --segment-size 1000 %s big.bin", container);
	assert_int_equal(swift_cli(tmp, args), 0);

	list(b, "d/", "/", &l);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.keys[0], "d/a.txt");
	assert_string_equal(l.keys[1], "d/empty/");
	assert_true(l.prefix[1]);
	assert_string_equal(l.keys[2], "d/sub/");
	assert_int_equal(smux_backend_head(b, &ctx, "d/empty", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
	assert_int_equal(get_str(b, "d/sub/b.txt", 0, SMUX_LEN_ALL, NULL, buf,
				 sizeof(buf), &err),
			 0);
	assert_string_equal(buf, "beta");
	/* the SLO: its size, all of it, and a range across segments */
	assert_int_equal(smux_backend_head(b, &ctx, "big.bin", &info, &err), 0);
	assert_int_equal(info.size, sizeof(big));
	assert_int_equal(get_str(b, "big.bin", 0, SMUX_LEN_ALL, info.etag, buf,
				 sizeof(buf), &err),
			 0);
	assert_memory_equal(buf, big, sizeof(big));
	assert_int_equal(
		get_str(b, "big.bin", 990, 20, NULL, buf, sizeof(buf), &err),
		0);
	assert_memory_equal(buf, big + 990, 20);

	/* and the other way */
	snprintf(args, sizeof(args), "download %s mine -o mine.out", container);
	assert_int_equal(swift_cli(tmp, args), 0);
	snprintf(path, sizeof(path), "%s/mine.out", tmp);
	{
		FILE *f = fopen(path, "r");
		size_t n;

		assert_non_null(f);
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		assert_int_equal(n, 15);
		assert_memory_equal(buf, "written by smux", 15);
	}
	snprintf(args, sizeof(args), "rm -rf '%s'", tmp);
	assert_int_equal(system(args), 0);
	smux_backend_unref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_v1_objects),
		cmocka_unit_test(test_v1_list_pages),
		cmocka_unit_test(test_v1_wrong_key),
		cmocka_unit_test(test_setattr_post),
		cmocka_unit_test(test_v1_del_many),
		cmocka_unit_test(test_v1_del_many_slo),
		cmocka_unit_test(test_v1_del_many_refused),
		cmocka_unit_test(test_v2_default_region),
		cmocka_unit_test(test_v2_internal_password),
		cmocka_unit_test(test_v2_no_endpoint),
		cmocka_unit_test(test_v2_revoked_token),
		cmocka_unit_test(test_v2_renew_before_expiry),
		cmocka_unit_test(test_v2_throttled),
		cmocka_unit_test(test_v2_stale_listing),
		cmocka_unit_test(test_v2_rename_noted),
		cmocka_unit_test(test_v2_threads_share_token),
		cmocka_unit_test(test_swiftclient_interop),
	};

	return cmocka_run_group_tests_name("swift_live", tests, group_setup,
					   NULL);
}
