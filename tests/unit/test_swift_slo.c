// SPDX-License-Identifier: MIT
/*
 * test_swift_slo.c - large objects and bulk delete of the swift backend:
 * the /info limits, the segment plan and the bulk-delete answer checked
 * alone, then against a real OpenStack Swift (support/swift_server.h):
 * a put above segment_threshold stored as an SLO (segments in
 * "<container>_segments") read whole, by range and pinned by its ETag;
 * an overwrite or a delete that removes the old segments; a failed upload
 * that leaves none; and the large objects `swift upload --segment-size`
 * writes (SLO and DLO) read, replaced and deleted with their segments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/swift_internal.h"
#include "smux/swift.h"
#include "support/swift_server.h"

static struct ts_swift srv;
static unsigned seq;

/* sizes of the large-object tests: small, so they run fast */
#define THRESHOLD ((uint64_t)40 * 1024)
#define SEGMENT	  ((uint64_t)24 * 1024)
#define BIG	  (2 * SEGMENT + 123) /* 3 segments, the last short */
#define SMALLER	  (BIG - 5000)	      /* still large: 2 segments */

static int group_setup(void **state)
{
	(void)state;
	return ts_swift_start(&srv) == 0 ? 0 : -1;
}

/* A backend on @container (NULL: a fresh one, its name in @name). */
static struct smux_backend *open_on(const char *container, char *name,
				    uint64_t threshold, uint64_t segment)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;
	char fresh[64];

	if (!container) {
		snprintf(fresh, sizeof(fresh), "slo-%d-%u", (int)getpid(),
			 ++seq);
		container = fresh;
	}
	if (name)
		snprintf(name, 64, "%s", container);
	o.auth_url = srv.auth_v1;
	o.username = srv.user_v1;
	o.key = srv.key_v1;
	o.container = container;
	o.segment_threshold = threshold;
	o.segment_size = segment;
	o.recent_ms = -1; /* what the server lists, nothing remembered */
	if (smux_swift_new("sw", &o, &b, &err) != 0)
		fail_msg("swift_new: %s", err.e.message);
	return b;
}

static int count_entry(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(size_t *)arg)++;
	return 0;
}

/* Objects in "<container>_segments" (0 when it does not exist). */
static size_t segments_in(const char *container)
{
	char seg[80];
	struct smux_backend *b;
	struct smux_error err = {0};
	struct smux_ctx ctx;
	size_t n = 0;
	int rc;

	snprintf(seg, sizeof(seg), "%s_segments", container);
	b = open_on(seg, NULL, 0, 0);
	smux_ctx_init(&ctx);
	rc = smux_backend_list(b, &ctx, "", NULL, count_entry, &n, &err);
	if (rc == -ENOENT)
		n = 0;
	else if (rc != 0)
		fail_msg("list %s: %s", seg, err.e.message);
	smux_backend_unref(b);
	return n;
}

struct etag_of {
	const char *key;
	char etag[SMUX_ETAG_MAX];
};

static int find_etag(void *arg, const struct smux_list_entry *e)
{
	struct etag_of *f = arg;

	if (strcmp(e->key, f->key) == 0)
		snprintf(f->etag, sizeof(f->etag), "%s", e->info.etag);
	return 0;
}

/*
 * Asserts "<container>_segments" holds @want objects. Swift updates a
 * container listing after the object write, asynchronously when the
 * container server is slow (a loaded machine): the count is polled for
 * up to 20 s before it fails.
 */
static void expect_segments(const char *container, size_t want, int line)
{
	size_t n = 0;

	for (int i = 0; i < 200; i++) {
		n = segments_in(container);
		if (n == want)
			return;
		usleep(100 * 1000);
	}
	fail_msg("line %d: %zu segments, not %zu", line, n, want);
}

#define EXPECT_SEGMENTS(c, n) expect_segments((c), (n), __LINE__)

static unsigned char *pattern(size_t len, unsigned salt)
{
	unsigned char *p = malloc(len);

	assert_non_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 31 + salt + i / 977) & 0xff);
	return p;
}

static int put_bytes(struct smux_backend *b, const char *key, const void *data,
		     size_t len, struct smux_info *info, struct smux_error *err)
{
	struct smux_source src;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	smux_source_buf(&src, data, len);
	return smux_backend_put(b, &ctx, key, &src, NULL, info, err);
}

/* [off, off+len) of @key into @out (@cap bytes); bytes read or -errno. */
static long get_bytes(struct smux_backend *b, const char *key, uint64_t off,
		      uint64_t len, const char *if_match, void *out, size_t cap,
		      struct smux_error *err)
{
	struct smux_get_opts go = {
		.offset = off, .length = len, .if_match = if_match};
	struct smux_sink sink;
	struct smux_ctx ctx;
	int rc;

	smux_ctx_init(&ctx);
	smux_sink_buf(&sink, out, cap);
	rc = smux_backend_get(b, &ctx, key, &go, &sink, NULL, err);
	return rc < 0 ? rc : (long)sink.written;
}

/* ---- alone ---- */

static void test_limits_parse(void **state)
{
	static const char info[] =
		"{\"swift\":{\"version\":\"2.30\"},\"slo\":{"
		"\"max_manifest_segments\":500,\"max_manifest_size\":1048576,"
		"\"min_segment_size\":4096},\"bulk_delete\":{"
		"\"max_deletes_per_request\":77,\"max_failed_deletes\":10}}";
	static const char names[] =
		"{\"swift\":{\"max_object_name_length\":2000,"
		"\"max_container_name_length\":100},\"bulk_delete\":{}}";
	static const char absurd[] =
		"{\"slo\":{\"max_manifest_segments\":-3},\"bulk_delete\":"
		"{\"max_deletes_per_request\":\"x\"}}";
	struct swift_limits l;

	(void)state;
	assert_int_equal(swift__limits_parse(info, strlen(info), &l), 0);
	assert_true(l.known && l.slo && l.bulk);
	assert_int_equal(l.max_segments, 500);
	assert_int_equal(l.max_manifest, 1048576);
	assert_int_equal(l.min_segment, 4096);
	assert_int_equal(l.max_deletes, 77);
	/* Swift's default name lengths, 1024 + 256, and two slashes */
	assert_int_equal(l.max_line, 1282);
	/* neither offered; absurd values fall back to Swift's defaults */
	assert_int_equal(swift__limits_parse("{}", 2, &l), 0);
	assert_true(l.known && !l.slo && !l.bulk);
	assert_int_equal(swift__limits_parse(absurd, strlen(absurd), &l), 0);
	assert_int_equal(l.max_segments, SWIFT_SLO_MAX_SEGMENTS);
	assert_int_equal(l.max_deletes, SWIFT_BULK_MAX_DELETES);
	assert_int_equal(swift__limits_parse(names, strlen(names), &l), 0);
	assert_int_equal(l.max_line, 2000 + 100 + 2);
	assert_int_equal(swift__limits_parse("[1,", 3, &l), -EINVAL);
	assert_int_equal(swift__limits_parse("<html>", 6, &l), -EINVAL);
}

static void test_plan(void **state)
{
	struct swift_limits l = {.known = true,
				 .slo = true,
				 .max_segments = 1000,
				 .min_segment = 1,
				 .max_manifest = 8u << 20};
	uint64_t seg, n;

	(void)state;
	assert_int_equal(
		swift__slo_plan(10u << 20, 1u << 20, &l, 200, &seg, &n), 0);
	assert_int_equal(seg, 1u << 20);
	assert_int_equal(n, 10);
	/* the minimum segment size wins over a smaller configured one */
	l.min_segment = 4u << 20;
	assert_int_equal(
		swift__slo_plan(10u << 20, 1u << 20, &l, 200, &seg, &n), 0);
	assert_int_equal(seg, 4u << 20);
	assert_int_equal(n, 3);
	/* too many segments: they grow so the count fits */
	l.min_segment = 1;
	l.max_segments = 4;
	assert_int_equal(
		swift__slo_plan(10u << 20, 1u << 20, &l, 200, &seg, &n), 0);
	assert_true(n <= 4);
	assert_true(seg * n >= 10u << 20);
	/* the manifest's size limits the count as well */
	l.max_segments = 1000;
	l.max_manifest = 2000;
	assert_int_equal(
		swift__slo_plan(10u << 20, 1u << 20, &l, 500, &seg, &n), 0);
	assert_true(n <= 4);
	/* 5 TiB in 1000 segments needs more than 5 GiB each */
	l.max_manifest = 8u << 20;
	assert_int_equal(
		swift__slo_plan(6000ULL << 30, 1u << 30, &l, 200, &seg, &n),
		-EFBIG);
}

static void test_bulk_answer(void **state)
{
	static const char ok[] =
		"{\"Response Status\": \"200 OK\", \"Response Body\": \"\", "
		"\"Number Deleted\": 3, \"Number Not Found\": 2, "
		"\"Errors\": []}";
	static const char bad[] =
		"{\"Response Status\": \"400 Bad Request\", \"Number Deleted\":"
		" 1, \"Number Not Found\": 0, \"Errors\": "
		"[[\"/c/x%20y\", \"409 Conflict\"], [\"/c/z\", \"409 "
		"Conflict\"]]}";
	static const char denied[] =
		"{\"Response Status\": \"401 Unauthorized\", \"Errors\": []}";
	struct smux_error err = {0};
	unsigned long del, nf;

	(void)state;
	assert_int_equal(
		swift__bulk_answer(ok, strlen(ok), "sw", &del, &nf, &err), 0);
	assert_int_equal(del, 3);
	assert_int_equal(nf, 2);
	assert_true(swift__bulk_answer(bad, strlen(bad), "sw", &del, &nf,
				       &err) < 0);
	assert_non_null(strstr(err.e.message, "/c/x%20y"));
	assert_non_null(strstr(err.e.message, "2 object(s)"));
	assert_int_equal(err.e.http_status, 409);
	smux_error_clear(&err);
	assert_true(swift__bulk_answer(denied, strlen(denied), "sw", &del, &nf,
				       &err) < 0);
	smux_error_clear(&err);
	assert_true(swift__bulk_answer("Number Deleted: 1\n", 18, "sw", &del,
				       &nf, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	smux_error_clear(&err);
	assert_true(swift__bulk_answer("{\"Errors\": []}", 14, "sw", &del, &nf,
				       &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
}

/* Five objects sent; what the answer says of each (Swift quotes the
 * paths of "Errors" again, as Python's quote does). */
static void test_bulk_answer_paths(void **state)
{
	static char p0[] = "/c/a", p1[] = "/c/sp ace", p2[] = "/c/\xc3\xbc+&~",
		    p3[] = "/c/gone", p4[] = "/c/d";
	static char *const paths[] = {p0, p1, p2, p3, p4};
	/* as Swift sends it: whitespace first (it keeps the connection
	 * alive), then two failures and a 404 among the errors; the
	 * counts cover every object, so the two not named are gone */
	static const char mixed[] =
		"  \r\n\r\n{\"Response Status\": \"400 Bad Request\", "
		"\"Response Body\": \"\", \"Number Deleted\": 2, \"Number "
		"Not Found\": 0, \"Errors\": [[\"/c/sp%20ace\", \"409 "
		"Conflict\"], [\"/c/%C3%BC%2B%26~\", \"403 Forbidden\"], "
		"[\"/c/gone\", \"404 Not Found\"]]}";
	/* cut short after max_failed_deletes: the rest is not known */
	static const char cut[] =
		"{\"Response Status\": \"400 Bad Request\", \"Response Body\": "
		"\"Max delete failures exceeded\", \"Number Deleted\": 1, "
		"\"Number Not Found\": 0, \"Errors\": [[\"/c/a\", \"409 "
		"Conflict\"]]}";
	static const char whole[] =
		"{\"Response Status\": \"413 Request Entity Too Large\", "
		"\"Response Body\": \"Maximum Bulk Deletes: 3 per request\", "
		"\"Number Deleted\": 0, \"Number Not Found\": 0, \"Errors\": "
		"[]}";
	static const char ok[] =
		"{\"Response Status\": \"200 OK\", \"Response Body\": \"\", "
		"\"Number Deleted\": 3, \"Number Not Found\": 2, \"Errors\": "
		"[]}";
	static const char only404[] =
		"{\"Response Status\": \"400 Bad Request\", \"Number "
		"Deleted\": "
		"4, \"Number Not Found\": 0, \"Errors\": [[\"/c/gone\", \"404 "
		"Not Found\"]]}";
	/* a bad token: the POST is 200, each object 401 */
	static const char denied[] =
		"{\"Response Status\": \"400 Bad Request\", \"Response Body\": "
		"\"\", \"Number Deleted\": 0, \"Number Not Found\": 0, "
		"\"Errors\": [[\"/c/a\", \"401 Unauthorized\"], [\"/c/sp%20ace"
		"\", \"401 Unauthorized\"], [\"/c/%C3%BC%2B%26~\", \"401 "
		"Unauthorized\"], [\"/c/gone\", \"401 Unauthorized\"], "
		"[\"/c/d\", \"401 Unauthorized\"]]}";
	/* an error for a path not sent (or no path): whose is unknown */
	static const char stranger[] =
		"{\"Response Status\": \"400 Bad Request\", \"Number "
		"Deleted\": "
		"4, \"Number Not Found\": 0, \"Errors\": [[\"/c/other\", \"409 "
		"Conflict\"]]}";
	static const char nameless[] =
		"{\"Response Status\": \"400 Bad Request\", \"Number "
		"Deleted\": "
		"3, \"Number Not Found\": 0, \"Errors\": [[\"/c/d\", \"409 "
		"Conflict\"], [7, \"409 Conflict\"]]}";
	static const char nostatus[] =
		"{\"Response Status\": \"400 Bad Request\", \"Number "
		"Deleted\": "
		"4, \"Number Not Found\": 0, \"Errors\": [[\"/c/d\"]]}";
	static const char *const garbage[] = {
		"<html>502 Bad Gateway</html>",
		"",
		"[]",
		"{\"Response Status\": \"200 OK\", \"Errors\": \"none\"}",
		"{\"Response Status\": \"OK\", \"Errors\": []}",
		"{\"Response Status\": \"200 OK\", \"Errors\": [",
	};
	struct smux_error err = {0};
	bool unauth;
	int rcs[5], rc;

	(void)state;
	rc = swift__bulk_answer_paths(mixed, strlen(mixed), "sw", paths, 5, rcs,
				      &unauth, &err);
	assert_int_equal(rc, rcs[1]);
	assert_int_equal(rcs[0], 0);
	assert_true(rcs[1] < 0);
	assert_int_equal(rcs[2], -EACCES);
	assert_int_equal(rcs[3], 0);
	assert_int_equal(rcs[4], 0);
	assert_false(unauth);
	assert_int_equal(err.e.http_status, 409);
	/* the object as sent, not as quoted back */
	assert_non_null(strstr(err.e.message, "\"/c/sp ace\""));
	assert_non_null(strstr(err.e.message, "2 object(s)"));

	smux_error_clear(&err);
	rc = swift__bulk_answer_paths(cut, strlen(cut), "sw", paths, 5, rcs,
				      &unauth, &err);
	assert_int_equal(rc, rcs[0]);
	assert_int_equal(err.e.http_status, 409);
	for (int i = 1; i < 5; i++)
		assert_int_equal(rcs[i], -EINVAL); /* the 400 */

	smux_error_clear(&err);
	rc = swift__bulk_answer_paths(whole, strlen(whole), "sw", paths, 5, rcs,
				      &unauth, &err);
	assert_true(rc < 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], rc);
	assert_int_equal(err.e.http_status, 413);
	assert_non_null(strstr(err.e.message, "\"/c/a\""));
	assert_non_null(strstr(err.e.message, "Maximum Bulk Deletes"));

	memset(rcs, 1, sizeof(rcs));
	assert_int_equal(swift__bulk_answer_paths(ok, strlen(ok), "sw", paths,
						  5, rcs, &unauth, &err),
			 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], 0);
	memset(rcs, 1, sizeof(rcs));
	assert_int_equal(swift__bulk_answer_paths(only404, strlen(only404),
						  "sw", paths, 5, rcs, &unauth,
						  &err),
			 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], 0);

	smux_error_clear(&err);
	rc = swift__bulk_answer_paths(denied, strlen(denied), "sw", paths, 5,
				      rcs, &unauth, &err);
	assert_int_equal(rc, -EACCES);
	assert_true(unauth);
	assert_int_equal(err.e.code, SMUX_E_CREDENTIAL_EXPIRED);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], -EACCES);

	smux_error_clear(&err);
	rc = swift__bulk_answer_paths(stranger, strlen(stranger), "sw", paths,
				      5, rcs, &unauth, &err);
	assert_true(rc < 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], rc);
	assert_non_null(strstr(err.e.message, "/c/other"));
	smux_error_clear(&err);
	rc = swift__bulk_answer_paths(nameless, strlen(nameless), "sw", paths,
				      5, rcs, &unauth, &err);
	assert_true(rc < 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rcs[i], rc);
	smux_error_clear(&err);
	/* an error without its status is one all the same */
	rc = swift__bulk_answer_paths(nostatus, strlen(nostatus), "sw", paths,
				      5, rcs, &unauth, &err);
	assert_true(rc < 0);
	assert_int_equal(rcs[4], rc);
	assert_int_equal(err.e.http_status, 502);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rcs[i], 0);

	for (size_t g = 0; g < sizeof(garbage) / sizeof(garbage[0]); g++) {
		smux_error_clear(&err);
		memset(rcs, 0, sizeof(rcs));
		rc = swift__bulk_answer_paths(garbage[g], strlen(garbage[g]),
					      "sw", paths, 5, rcs, &unauth,
					      &err);
		assert_int_equal(rc, -smux_code_errno(SMUX_E_BAD_RESPONSE));
		assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
		for (int i = 0; i < 5; i++)
			assert_int_equal(rcs[i], rc);
		assert_non_null(strstr(err.e.message, "\"/c/a\" and 4 more"));
	}
}

/* ---- on Swift ---- */

/* Put above the threshold: an SLO of 3 segments that reads back whole,
 * by a range across a segment boundary, and pinned by its ETag, which
 * HEAD and the listing report too. */
static void test_slo_put_read(void **state)
{
	char c[64];
	struct smux_backend *b = open_on(NULL, c, THRESHOLD, SEGMENT);
	unsigned char *data = pattern(BIG, 1), *buf = malloc(BIG + 16);
	struct smux_error err = {0};
	struct smux_info put_info, head;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_non_null(buf);
	if (put_bytes(b, "big.bin", data, BIG, &put_info, &err) != 0)
		fail_msg("put: %s", err.e.message);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(smux_backend_head(b, &ctx, "big.bin", &head, &err), 0);
	assert_int_equal(head.size, BIG);
	assert_string_equal(head.etag, put_info.etag);
	{
		/* the listing reports the same version (its slo_etag, not
		 * the manifest's "hash") */
		struct etag_of f = {.key = "big.bin"};

		assert_int_equal(smux_backend_list(b, &ctx, "", NULL, find_etag,
						   &f, &err),
				 0);
		assert_string_equal(f.etag, put_info.etag);
	}
	assert_int_equal(get_bytes(b, "big.bin", 0, SMUX_LEN_ALL, put_info.etag,
				   buf, BIG + 16, &err),
			 BIG);
	assert_memory_equal(buf, data, BIG);
	/* across the boundary of segments 1 and 2 */
	assert_int_equal(get_bytes(b, "big.bin", SEGMENT - 100, 300, NULL, buf,
				   BIG, &err),
			 300);
	assert_memory_equal(buf, data + SEGMENT - 100, 300);
	/* the tail, in the short last segment */
	assert_int_equal(get_bytes(b, "big.bin", BIG - 10, SMUX_LEN_ALL, NULL,
				   buf, BIG, &err),
			 10);
	assert_memory_equal(buf, data + BIG - 10, 10);
	/* a wrong pin is refused */
	assert_true(get_bytes(b, "big.bin", 0, 10,
			      "0123456789abcdef0123456789abcdef", buf, BIG,
			      &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_PRECONDITION_FAILED);
	smux_error_clear(&err);
	/* at the threshold: one plain object */
	assert_int_equal(put_bytes(b, "edge.bin", data, THRESHOLD, NULL, &err),
			 0);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(smux_backend_del(b, &ctx, "big.bin", &err), 0);
	assert_int_equal(smux_backend_del(b, &ctx, "edge.bin", &err), 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(smux_backend_head(b, &ctx, "big.bin", &head, &err),
			 -ENOENT);
	free(data);
	free(buf);
	smux_backend_unref(b);
}

/* a key that needs escaping: in segment names, the manifest, bulk delete */
#define KEY "dir/f \xc3\xbc%+&?.bin"

/* Overwrites: SLO over SLO keeps only the new segments (deleted with
 * bulk delete), a plain object over an SLO keeps none, an SLO over a
 * plain object adds its own. */
static void test_slo_overwrite(void **state)
{
	char c[64];
	struct smux_backend *b = open_on(NULL, c, THRESHOLD, SEGMENT);
	unsigned char *d1 = pattern(BIG, 1), *d2 = pattern(SMALLER, 2);
	unsigned char *buf = malloc(BIG);
	struct smux_error err = {0};
	unsigned long bulk0;

	(void)state;
	assert_int_equal(put_bytes(b, KEY, d1, BIG, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 3);
	bulk0 = smux_swift_bulk_count(b);
	assert_int_equal(put_bytes(b, KEY, d2, SMALLER, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 2);
	assert_true(smux_swift_bulk_count(b) > bulk0);
	assert_int_equal(
		get_bytes(b, KEY, 0, SMUX_LEN_ALL, NULL, buf, BIG, &err),
		SMALLER);
	assert_memory_equal(buf, d2, SMALLER);
	/* a small file over the large one */
	assert_int_equal(put_bytes(b, KEY, "small", 5, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(
		get_bytes(b, KEY, 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), 5);
	assert_memory_equal(buf, "small", 5);
	assert_int_equal(put_bytes(b, KEY, d1, BIG, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(smux_swift_orphan_count(b), 0);
	free(d1);
	free(d2);
	free(buf);
	smux_backend_unref(b);
}

/*
 * A put of a key its backend saw absent goes out with "If-None-Match: *"
 * and without the HEAD for a replaced large object's segments
 * (swift_absent.c). Another client made the key a large object in
 * between: Swift refuses that put (412), the put then does the HEAD and
 * the old segments go all the same. A put after an own delete is the
 * same case.
 */
static void test_put_seen_absent(void **state)
{
	char c[64];
	struct smux_backend *a = open_on(NULL, c, THRESHOLD, SEGMENT);
	struct smux_backend *other = open_on(c, NULL, THRESHOLD, SEGMENT);
	unsigned char *d1 = pattern(BIG, 3), *buf = malloc(BIG);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	/* the container exists; "a" sees KEY absent */
	assert_int_equal(put_bytes(a, "x", "x", 1, NULL, &err), 0);
	assert_int_equal(smux_backend_head(a, &ctx, KEY, &info, &err), -ENOENT);
	assert_true(swift__absent_seen(swift__from(a), KEY));
	assert_int_equal(put_bytes(other, KEY, d1, BIG, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(put_bytes(a, KEY, "small", 5, &info, &err), 0);
	assert_false(swift__absent_seen(swift__from(a), KEY));
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(
		get_bytes(a, KEY, 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), 5);
	assert_memory_equal(buf, "small", 5);
	/* deleted by "a", made large by the other, put by "a" again */
	assert_int_equal(smux_backend_del(a, &ctx, KEY, &err), 0);
	assert_true(swift__absent_seen(swift__from(a), KEY));
	assert_int_equal(put_bytes(other, KEY, d1, BIG, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(put_bytes(a, KEY, "again", 5, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(
		get_bytes(a, KEY, 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), 5);
	assert_memory_equal(buf, "again", 5);
	/* seen absent and still absent: the conditional put stores it */
	assert_int_equal(smux_backend_head(a, &ctx, "new", &info, &err),
			 -ENOENT);
	assert_int_equal(put_bytes(a, "new", "fresh", 5, NULL, &err), 0);
	assert_int_equal(
		get_bytes(a, "new", 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), 5);
	assert_memory_equal(buf, "fresh", 5);
	assert_int_equal(smux_swift_orphan_count(a), 0);
	free(d1);
	free(buf);
	smux_backend_unref(other);
	smux_backend_unref(a);
}

/* Rename of an SLO moves its manifest (the segments stay, shared by no
 * one), over an SLO whose segments go; a copy over an SLO drops its
 * segments too. */
static void test_slo_rename_copy(void **state)
{
	char c[64];
	struct smux_backend *b = open_on(NULL, c, THRESHOLD, SEGMENT);
	unsigned char *d1 = pattern(BIG, 5), *d2 = pattern(SMALLER, 6);
	unsigned char *buf = malloc(BIG);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(put_bytes(b, "a", d1, BIG, NULL, &err), 0);
	assert_int_equal(put_bytes(b, "b", d2, SMALLER, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 5);
	if (smux_backend_rename(b, &ctx, "a", "b", &err) != 0)
		fail_msg("rename: %s", err.e.message);
	EXPECT_SEGMENTS(c, 3);
	assert_int_equal(smux_backend_head(b, &ctx, "a", &info, &err), -ENOENT);
	smux_error_clear(&err);
	assert_int_equal(
		get_bytes(b, "b", 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), BIG);
	assert_memory_equal(buf, d1, BIG);
	/* a copy of a small file over it */
	assert_int_equal(put_bytes(b, "s", "tiny", 4, NULL, &err), 0);
	assert_int_equal(smux_backend_copy(b, &ctx, "s", "b", &err), 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(
		get_bytes(b, "b", 0, SMUX_LEN_ALL, NULL, buf, BIG, &err), 4);
	assert_memory_equal(buf, "tiny", 4);
	assert_int_equal(smux_swift_orphan_count(b), 0);
	free(d1);
	free(d2);
	free(buf);
	smux_backend_unref(b);
}

struct failing {
	const unsigned char *data;
	uint64_t fail_at;
};

static long failing_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct failing *f = arg;

	if (pos + len > f->fail_at)
		return -EIO;
	memcpy(dst, f->data + pos, len);
	return (long)len;
}

/* A source that fails in the second segment: the put fails, the one
 * segment already uploaded is deleted, the old object stays. */
static void test_slo_failed_upload(void **state)
{
	char c[64];
	struct smux_backend *b = open_on(NULL, c, THRESHOLD, SEGMENT);
	unsigned char *data = pattern(BIG, 3), buf[16];
	struct failing f = {.data = data, .fail_at = SEGMENT + 500};
	struct smux_error err = {0};
	struct smux_source src;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(put_bytes(b, "keep", "old", 3, NULL, &err), 0);
	smux_source_cb(&src, failing_read, &f, BIG);
	assert_true(smux_backend_put(b, &ctx, "keep", &src, NULL, NULL, &err) <
		    0);
	smux_error_clear(&err);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(smux_swift_orphan_count(b), 0);
	assert_int_equal(get_bytes(b, "keep", 0, SMUX_LEN_ALL, NULL, buf,
				   sizeof(buf), &err),
			 3);
	assert_memory_equal(buf, "old", 3);
	free(data);
	smux_backend_unref(b);
}

static int swift_cli(const char *cwd, const char *args)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && swift -q -A '%s' -U '%s' -K '%s' %s "
		 ">/dev/null",
		 cwd, srv.auth_v1, srv.user_v1, srv.key_v1, args);
	return system(cmd);
}

/* What `swift upload --segment-size` stores (@slo: --use-slo, else a
 * DLO) reads right, and deleting it or putting over it through the
 * backend leaves no segment behind. */
static void swiftclient_large(bool slo)
{
	char c[64], tmp[] = "/tmp/smux-swslo-XXXXXX", path[256], args[512];
	struct smux_backend *b = open_on(NULL, c, 0, 0); /* defaults */
	unsigned char *data = pattern(5000, 4), buf[6000];
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	FILE *f;

	smux_ctx_init(&ctx);
	assert_non_null(mkdtemp(tmp));
	snprintf(path, sizeof(path), "%s/big.bin", tmp);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, 5000, f), 5000);
	fclose(f);
	assert_int_equal(put_bytes(b, "mine", "x", 1, NULL, &err), 0);
	/* two objects of 3 segments: big.bin, and big2.bin as a copy */
	snprintf(path, sizeof(path), "cp %s/big.bin %s/big2.bin", tmp, tmp);
	assert_int_equal(system(path), 0);
	snprintf(args, sizeof(args),
		 "upload %s--segment-size 2000 %s big.bin big2.bin",
		 slo ? "--use-slo " : "", c);
	assert_int_equal(swift_cli(tmp, args), 0);
	EXPECT_SEGMENTS(c, 6);
	assert_int_equal(smux_backend_head(b, &ctx, "big.bin", &info, &err), 0);
	assert_int_equal(info.size, 5000);
	assert_int_equal(get_bytes(b, "big.bin", 0, SMUX_LEN_ALL, info.etag,
				   buf, sizeof(buf), &err),
			 5000);
	assert_memory_equal(buf, data, 5000);
	assert_int_equal(
		get_bytes(b, "big.bin", 1990, 30, NULL, buf, sizeof(buf), &err),
		30);
	assert_memory_equal(buf, data + 1990, 30);
	/* deleted through the backend, with its segments */
	assert_int_equal(smux_backend_del(b, &ctx, "big.bin", &err), 0);
	EXPECT_SEGMENTS(c, 3);
	/* replaced through the backend: its old segments go */
	assert_int_equal(put_bytes(b, "big2.bin", "new", 3, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(get_bytes(b, "big2.bin", 0, SMUX_LEN_ALL, NULL, buf,
				   sizeof(buf), &err),
			 3);
	snprintf(args, sizeof(args), "rm -rf '%s'", tmp);
	assert_int_equal(system(args), 0);
	free(data);
	smux_backend_unref(b);
}

/* Lists all of @b (its listing notes what it knows, swift_list.c). */
static void list_all(struct smux_backend *b)
{
	struct smux_error err = {0};
	struct smux_ctx ctx;
	size_t n = 0;

	smux_ctx_init(&ctx);
	if (smux_backend_list(b, &ctx, "", NULL, count_entry, &n, &err) != 0)
		fail_msg("list: %s", err.e.message);
}

/* Lists @b until it knows @key a plain object (Swift's listing may lag
 * a write on a loaded machine): up to 20 s, else fails. */
static void expect_listed_plain(struct smux_backend *b, const char *key)
{
	for (int i = 0; i < 200; i++) {
		list_all(b);
		if (swift__plain_seen(swift__from(b), key))
			return;
		usleep(100 * 1000);
	}
	fail_msg("a listing never made \"%s\" known plain", key);
}

/*
 * A key the backend knows as a plain object is put or deleted without
 * the HEAD for a large object's segments (swift_absent.c): after its own
 * plain put, or a listing entry that is a version it knows (its attribute
 * cache matches it) with bytes and no slo_etag. Neither ever makes a
 * large object "plain": an SLO is listed with its slo_etag, and a DLO
 * whose manifest has a body is listed with that body's size and MD5,
 * which no HEAD of it shows; so deleting either still takes its segments.
 * A put that says the caller saw the key absent (SMUX_PUT_NEW) is
 * conditional: over a large object another client wrote, Swift refuses
 * it and the old segments go all the same.
 */
static void test_plain_notes(void **state)
{
	char c[64], tmp[] = "/tmp/smux-swplain-XXXXXX", args[512];
	struct smux_backend *a = open_on(NULL, c, THRESHOLD, SEGMENT);
	struct smux_backend *b = open_on(c, NULL, THRESHOLD, SEGMENT);
	struct swiftb *sa = swift__from(a), *sb = swift__from(b);
	unsigned char *d1 = pattern(BIG, 5), buf[64];
	struct smux_put_opts po = {.flags = SMUX_PUT_NEW};
	struct smux_error err = {0};
	struct smux_source src;
	struct smux_info info;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_non_null(mkdtemp(tmp));
	/* own puts: a plain one is noted, a large one is not */
	assert_int_equal(put_bytes(a, "p", "plain", 5, NULL, &err), 0);
	assert_true(swift__plain_seen(sa, "p"));
	assert_int_equal(put_bytes(a, "big", d1, BIG, NULL, &err), 0);
	assert_false(swift__plain_seen(sa, "big"));
	EXPECT_SEGMENTS(c, 3);
	/* "b" learns both versions by a HEAD (which notes nothing): then
	 * its listing notes the plain one only */
	assert_int_equal(smux_backend_head(b, &ctx, "p", &info, &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "big", &info, &err), 0);
	assert_false(swift__plain_seen(sb, "p"));
	expect_listed_plain(b, "p");
	assert_false(swift__plain_seen(sb, "big"));
	/* a DLO manifest with a body ("body", segment "seg/1"), made by
	 * another client's POST of a plain object, listed after a HEAD */
	assert_int_equal(put_bytes(a, "seg/1", "segment", 7, NULL, &err), 0);
	assert_int_equal(put_bytes(a, "dm", "body", 4, NULL, &err), 0);
	snprintf(args, sizeof(args),
		 "post -H 'X-Object-Manifest: %s/seg/' %s dm", c, c);
	assert_int_equal(swift_cli(tmp, args), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "dm", &info, &err), 0);
	assert_int_equal(info.size, 7);
	list_all(b);
	assert_false(swift__plain_seen(sb, "dm"));
	/* so deleting the DLO and the SLO takes their segments */
	assert_int_equal(smux_backend_del(b, &ctx, "dm", &err), 0);
	assert_int_equal(smux_backend_head(b, &ctx, "seg/1", &info, &err),
			 -ENOENT);
	smux_error_clear(&err);
	assert_int_equal(smux_backend_del(b, &ctx, "big", &err), 0);
	EXPECT_SEGMENTS(c, 0);
	/* the plain one goes by a DELETE alone, and is absent after it */
	assert_int_equal(smux_backend_del(b, &ctx, "p", &err), 0);
	assert_true(swift__absent_seen(sb, "p"));
	assert_int_equal(smux_backend_head(a, &ctx, "p", &info, &err), -ENOENT);
	smux_error_clear(&err);
	/* "a" puts a name it saw absent, but "b" made it large meanwhile */
	assert_int_equal(put_bytes(b, "n", d1, BIG, NULL, &err), 0);
	EXPECT_SEGMENTS(c, 3);
	smux_source_buf(&src, "new", 3);
	assert_int_equal(smux_backend_put(a, &ctx, "n", &src, &po, NULL, &err),
			 0);
	EXPECT_SEGMENTS(c, 0);
	assert_int_equal(get_bytes(a, "n", 0, SMUX_LEN_ALL, NULL, buf,
				   sizeof(buf), &err),
			 3);
	assert_memory_equal(buf, "new", 3);
	assert_int_equal(smux_swift_orphan_count(a), 0);
	assert_int_equal(smux_swift_orphan_count(b), 0);
	rmdir(tmp);
	free(d1);
	smux_backend_unref(b);
	smux_backend_unref(a);
}

/*
 * Swift answers a bulk delete 200 before it runs the deletes, so a token
 * that went bad shows as a 401 for each object, not as the POST's status:
 * the batch is sent once more with a new token, and every key goes.
 */
static void test_bulk_token_renewed(void **state)
{
	static const char *const keys[] = {"k1", "k 2", "k/3"};
	char c[64];
	struct smux_backend *b = open_on(NULL, c, THRESHOLD, SEGMENT);
	struct swiftb *s = swift__from(b);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned long bulk0, auth0;
	char *old;
	int rcs[3];

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(put_bytes(b, keys[i], "v", 1, NULL, &err), 0);
	/* the token goes bad behind the backend's back (revoked) */
	pthread_mutex_lock(&s->auth.mu);
	old = s->auth.token;
	s->auth.token = strdup("AUTH_tk00000000000000000000000000000000");
	assert_non_null(s->auth.token);
	pthread_mutex_unlock(&s->auth.mu);
	free(old);
	bulk0 = smux_swift_bulk_count(b);
	auth0 = smux_swift_auth_count(b);
	if (smux_backend_del_many(b, &ctx, keys, 3, rcs, &err) != 0)
		fail_msg("del_many: %s", err.e.message);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(rcs[i], 0);
	assert_int_equal(smux_swift_bulk_count(b), bulk0 + 2);
	assert_int_equal(smux_swift_auth_count(b), auth0 + 1);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(
			smux_backend_head(b, &ctx, keys[i], &info, &err),
			-ENOENT);
	smux_backend_unref(b);
}

/* A DLO manifest whose prefix is empty (the whole container) or covers
 * the manifest itself is hostile input: deleting it deletes it alone. */
static void test_dlo_hostile_prefix(void **state)
{
	char c[64], tmp[] = "/tmp/smux-swdlo-XXXXXX", args[512];
	struct smux_backend *b = open_on(NULL, c, 0, 0);
	struct smux_error err = {0};
	struct smux_info info;
	struct smux_ctx ctx;
	static const char *const prefixes[] = {"", "m"};

	(void)state;
	smux_ctx_init(&ctx);
	assert_non_null(mkdtemp(tmp));
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(put_bytes(b, "keep", "k", 1, NULL, &err), 0);
		assert_int_equal(put_bytes(b, "m", "", 0, NULL, &err), 0);
		assert_int_equal(put_bytes(b, "m2", "x", 1, NULL, &err), 0);
		snprintf(args, sizeof(args),
			 "post -H 'X-Object-Manifest: %s/%s' %s m", c,
			 prefixes[i], c);
		assert_int_equal(swift_cli(tmp, args), 0);
		assert_int_equal(smux_backend_del(b, &ctx, "m", &err), 0);
		assert_int_equal(
			smux_backend_head(b, &ctx, "keep", &info, &err), 0);
		assert_int_equal(smux_backend_head(b, &ctx, "m2", &info, &err),
				 0);
		assert_int_equal(smux_backend_head(b, &ctx, "m", &info, &err),
				 -ENOENT);
		smux_error_clear(&err);
	}
	rmdir(tmp);
	smux_backend_unref(b);
}

static void test_swiftclient_slo(void **state)
{
	(void)state;
	swiftclient_large(true);
}

static void test_swiftclient_dlo(void **state)
{
	(void)state;
	swiftclient_large(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits_parse),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_bulk_answer),
		cmocka_unit_test(test_bulk_answer_paths),
		cmocka_unit_test(test_slo_put_read),
		cmocka_unit_test(test_slo_overwrite),
		cmocka_unit_test(test_slo_rename_copy),
		cmocka_unit_test(test_put_seen_absent),
		cmocka_unit_test(test_plain_notes),
		cmocka_unit_test(test_slo_failed_upload),
		cmocka_unit_test(test_swiftclient_slo),
		cmocka_unit_test(test_swiftclient_dlo),
		cmocka_unit_test(test_dlo_hostile_prefix),
		cmocka_unit_test(test_bulk_token_renewed),
	};

	return cmocka_run_group_tests_name("swift_slo", tests, group_setup,
					   NULL);
}
