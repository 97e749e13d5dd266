// SPDX-License-Identifier: MIT
/*
 * test_bunny.c - the bunny backend against the Bunny Storage emulator
 * (tests/servers/bunny_emu.py, one per run, a fresh zone per test) where
 * the conformance suite does not reach: the emulator's fault knobs (a
 * burst of 429s fails nothing, a checksum refused once is sent again, a
 * server ignoring Range), the 401 of a wrong password or region, deletes
 * that must not recurse, rename from a verified local copy without a
 * GET (alone and through a mux), the request slots, `type = bunny` in a config
 * file; and, with no server, the JSON and timestamp parsers on hostile
 * answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/bunny_internal.h"
#include "fs/config.h"
#include "mux_helpers.h"
#include "smux/bunny.h"
#include "smux/memory.h"
#include "smux/mux.h"
#include "support/bunny_server.h"

static struct ts_server srv;
static char srv_dir[64];
static char srv_url[64];
static unsigned zones;

/* The current test's zone and backend. */
struct env {
	char zone[32];
	struct smux_backend *b;
	struct smux_ctx ctx;
};

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(srv_dir, sizeof(srv_dir), "/tmp/smux-test-bunny-XXXXXX");
	if (!mkdtemp(srv_dir))
		return -1;
	if (ts_bunny_start(&srv, srv_dir, srv_url, sizeof(srv_url)) < 0) {
		fprintf(stderr,
			"*** test_bunny: cannot start the emulator; "
			"scripts/install-deps.sh installs python3 ***\n");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	ts_server_stop(&srv);
	nftw(srv_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* A fresh zone and a backend on it with @conc request slots. */
static struct env *env_new(unsigned conc)
{
	struct smux_bunny_opts o = {.access_key = TS_BUNNY_KEY,
				    .max_concurrency = conc};
	struct env *e = calloc(1, sizeof(*e));
	struct smux_error err;

	assert_non_null(e);
	snprintf(e->zone, sizeof(e->zone), "u%u", ++zones);
	assert_int_equal(ts_bunny_zone(&srv, e->zone, TS_BUNNY_KEY), 0);
	o.zone = e->zone;
	o.endpoint = srv_url;
	o.backoff_base_ms = 1; /* the bursts below are answered at once */
	assert_int_equal(smux_bunny_new("bunny", &o, &e->b, &err), 0);
	smux_ctx_init(&e->ctx);
	/* knobs back to the documented behaviour */
	assert_int_equal(
		ts_bunny_set(&srv, "range=1&range_cap=0&burst429=0&burst5xx=0&"
				   "bad_checksum=0&delay_ms=0&describe_dirs=1&"
				   "checksums=1&"
				   "retry_after=-1"),
		0);
	return e;
}

static void env_free(struct env *e)
{
	smux_backend_unref(e->b);
	free(e);
}

static long stat_of(const char *name)
{
	long v = ts_bunny_stat(&srv, name);

	assert_true(v >= 0);
	return v;
}

/* Reads the stored file of @key in the emulator's tree, as a curl GET of
 * the zone would: the bytes the server keeps. */
static void expect_stored(const struct env *e, const char *key,
			  const void *want, size_t len)
{
	char path[512], buf[8192];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/store/%s/%s", srv_dir, e->zone, key);
	f = fopen(path, "rb");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	assert_int_equal(n, len);
	assert_memory_equal(buf, want, len);
}

static void put(struct env *e, const char *key, const void *buf, size_t len)
{
	struct smux_error err;
	int rc = smux_backend_put_buf(e->b, &e->ctx, key, buf, len, &err);

	if (rc)
		fail_msg("put %s: %s", key, err.e.message);
}

/* ---- no server ---- */

static void test_time_parse(void **state)
{
	(void)state;
	/* 2024-01-15T10:30:00Z is 1705314600 */
	assert_int_equal(smux__bunny_parse_time("2024-01-15T10:30:00.000", 23),
			 1705314600LL * 1000000000LL);
	assert_int_equal(smux__bunny_parse_time("2024-01-15T10:30:00.5Z", 22),
			 1705314600LL * 1000000000LL + 500000000LL);
	assert_int_equal(smux__bunny_parse_time("2024-01-15T10:30:00", 19),
			 1705314600LL * 1000000000LL);
	/* zones other than UTC, junk, truncation, out of range */
	assert_int_equal(
		smux__bunny_parse_time("2024-01-15T10:30:00+02:00", 25), -1);
	assert_int_equal(smux__bunny_parse_time("2024-01-15T10:30", 16), -1);
	assert_int_equal(smux__bunny_parse_time("2024-13-15T10:30:00", 19), -1);
	assert_int_equal(smux__bunny_parse_time("2024-01-15T10:30:00.", 20),
			 -1);
	assert_int_equal(smux__bunny_parse_time("abcd-01-15T10:30:00", 19), -1);
}

static void test_json_hostile(void **state)
{
	struct smux__bunny_obj o, *v;
	char why[128];
	size_t n;

	static const char good[] =
		"{\"ObjectName\":\"a\",\"Length\":3,\"IsDirectory\":false,"
		"\"LastChanged\":\"2024-01-15T10:30:00.000\",\"Checksum\":"
		"\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2"
		"0015ad\",\"ReplicatedZones\":null,\"Guid\":\"x\"}";

	(void)state;
	/* zero bytes are not a document */
	assert_int_equal(smux__bunny_parse_obj(good, 0, &o, why, sizeof(why)),
			 -EBADMSG);
	assert_int_equal(smux__bunny_parse_obj(good, sizeof(good) - 1, &o, why,
					       sizeof(why)),
			 0);
	assert_string_equal(o.name, "a");
	assert_int_equal(o.length, 3);
	/* the checksum is kept uppercase, whatever case it came in */
	assert_string_equal(o.checksum, "BA7816BF8F01CFEA414140DE5DAE2223B00361"
					"A396177A9CB410FF61F20015AD");
	free(o.name);
#define BAD_OBJ(doc)                                                           \
	assert_int_equal(                                                      \
		smux__bunny_parse_obj(doc, strlen(doc), &o, why, sizeof(why)), \
		-EBADMSG)
	BAD_OBJ("not json");
	BAD_OBJ("[]");
	BAD_OBJ("{\"ObjectName\":\"a/b\"}");		 /* two segments */
	BAD_OBJ("{\"ObjectName\":\"a\\u0000b\"}");	 /* a NUL */
	BAD_OBJ("{\"ObjectName\":\"a\",\"Length\":-1}"); /* no size */
	BAD_OBJ("{\"ObjectName\":\"a\",\"Length\":\"3\"}");
	BAD_OBJ("{\"ObjectName\":\"a\",\"IsDirectory\":\"yes\"}");
	BAD_OBJ("{\"ObjectName\":\"a\",\"LastChanged\":\"yesterday\"}");
	BAD_OBJ("{\"ObjectName\":7}");
	assert_int_equal(
		smux__bunny_parse_list("{}", 2, &v, &n, why, sizeof(why)),
		-EBADMSG);
	assert_int_equal(smux__bunny_parse_list("[{\"ObjectName\":\"a\"},7]",
						23, &v, &n, why, sizeof(why)),
			 -EBADMSG);
	assert_int_equal(
		smux__bunny_parse_list("[]", 2, &v, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	smux__bunny_objs_free(v, n);
}

static void test_options(void **state)
{
	struct smux_bunny_opts o = {.zone = "z", .access_key = "k"};
	struct smux_backend *b;
	struct smux_error err;

	(void)state;
	assert_string_equal(smux_bunny_region_host(NULL),
			    "storage.bunnycdn.com");
	assert_string_equal(smux_bunny_region_host("syd"),
			    "syd.storage.bunnycdn.com");
	assert_null(smux_bunny_region_host("mars"));
	o.region = "mars";
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), -EINVAL);
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	o.region = "uk";
	o.zone = "a/b";
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), -EINVAL);
	o.zone = "z";
	o.access_key = "with space";
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), -EINVAL);
	assert_null(strstr(err.e.message, "with space"));
	o.access_key = "k";
	o.endpoint = "http://user:pw@host/";
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), -EINVAL);
	o.endpoint = NULL;
	o.max_concurrency = 1000;
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), -EINVAL);
	o.max_concurrency = 0;
	assert_int_equal(smux_bunny_new("b", &o, &b, &err), 0);
	smux_backend_unref(b);
}

/* ---- against the emulator ---- */

/* What the backend puts is what the server stores, with the Checksum. */
static void test_put_stored(void **state)
{
	struct env *e = env_new(0);
	unsigned char buf[5000];

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	put(e, "a/b/c.bin", buf, sizeof(buf));
	expect_stored(e, "a/b/c.bin", buf, sizeof(buf));
	assert_true(stat_of("puts_with_checksum") >= 1);
	env_free(e);
}

/* A burst of 429s (more than one request's worth) fails nothing. */
static void test_429_burst(void **state)
{
	struct env *e = env_new(0);
	struct smux_error err;
	struct smux_info info;
	unsigned char *got;
	size_t len;
	long before = stat_of("served429");

	(void)state;
	assert_int_equal(ts_bunny_set(&srv, "burst429=12&retry_after=0"), 0);
	put(e, "t/x", "hello", 5);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "t/x", &info, &err),
			 0);
	assert_int_equal(
		smux_backend_get_all(e->b, &e->ctx, "t/x", &got, &len, &err),
		0);
	assert_int_equal(len, 5);
	assert_memory_equal(got, "hello", 5);
	free(got);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "t/x", &err), 0);
	/* every 429 of the burst was served and absorbed */
	assert_int_equal(stat_of("served429") - before, 12);
	env_free(e);
}

/* A burst of 503s likewise. */
static void test_5xx_burst(void **state)
{
	struct env *e = env_new(0);

	(void)state;
	assert_int_equal(ts_bunny_set(&srv, "burst5xx=3"), 0);
	put(e, "f", "x", 1);
	expect_stored(e, "f", "x", 1);
	env_free(e);
}

/* A checksum refused once is sent again; twice is an error. */
static void test_checksum_retry(void **state)
{
	struct env *e = env_new(0);
	struct smux_error err;
	long puts0 = stat_of("by_method.PUT");
	long bad0 = stat_of("checksum400");
	int rc;

	(void)state;
	assert_int_equal(ts_bunny_set(&srv, "bad_checksum=1"), 0);
	put(e, "c/one", "payload", 7);
	expect_stored(e, "c/one", "payload", 7);
	assert_int_equal(stat_of("checksum400") - bad0, 1);
	assert_int_equal(stat_of("by_method.PUT") - puts0, 2);

	assert_int_equal(ts_bunny_set(&srv, "bad_checksum=2"), 0);
	rc = smux_backend_put_buf(e->b, &e->ctx, "c/two", "payload", 7, &err);
	assert_true(rc < 0);
	assert_int_equal(err.e.code, SMUX_E_IO);
	assert_non_null(strstr(err.e.message, "SHA-256"));
	assert_int_equal(stat_of("checksum400") - bad0, 3);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "c/two", NULL, &err),
			 -ENOENT);
	env_free(e);
}

/* A source that counts the bytes read from it. */
struct counted {
	const char *data;
	size_t len;
	size_t read;
};

static long counted_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct counted *c = arg;

	if (off >= c->len)
		return 0;
	if (len > c->len - off)
		len = c->len - (size_t)off;
	memcpy(buf, c->data + off, len);
	c->read += len;
	return (long)len;
}

/* A put given the content's SHA-256 (smuxfs keeps it while staging)
 * reads its source once, to send it; a wrong one given is answered 400
 * by the server and the second try sends the source's own. */
static void test_given_checksum(void **state)
{
	static const unsigned char sha_payload[32] = {
		0x23, 0x9f, 0x59, 0xed, 0x55, 0xe7, 0x37, 0xc7,
		0x71, 0x47, 0xcf, 0x55, 0xad, 0x0c, 0x1b, 0x03,
		0x0b, 0x6d, 0x7e, 0xe7, 0x48, 0xa7, 0x42, 0x69,
		0x52, 0xf9, 0xb8, 0x52, 0xd5, 0xa9, 0x35, 0xe5};
	unsigned char wrong[32] = {0};
	struct env *e = env_new(0);
	struct counted c = {.data = "payload", .len = 7};
	struct smux_put_opts po = {.sha256 = sha_payload};
	struct smux_source src;
	struct smux_error err;
	long bad0 = stat_of("checksum400");

	(void)state;
	smux_source_cb(&src, counted_read, &c, c.len);
	assert_int_equal(
		smux_backend_put(e->b, &e->ctx, "g/one", &src, &po, NULL, &err),
		0);
	expect_stored(e, "g/one", "payload", 7);
	assert_int_equal(c.read, 7); /* sent, not hashed first */
	assert_int_equal(stat_of("checksum400") - bad0, 0);

	c.read = 0;
	po.sha256 = wrong;
	smux_source_cb(&src, counted_read, &c, c.len);
	assert_int_equal(
		smux_backend_put(e->b, &e->ctx, "g/two", &src, &po, NULL, &err),
		0);
	expect_stored(e, "g/two", "payload", 7);
	assert_int_equal(stat_of("checksum400") - bad0, 1);
	env_free(e);
}

/* A server that ignores Range: ranged gets still get their bytes. */
static void test_no_range(void **state)
{
	struct env *e = env_new(0);
	unsigned char buf[3000], out[3000];
	struct smux_get_opts go = {.offset = 1000, .length = 50};
	struct smux_error err;
	struct smux_sink sink;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i % 251);
	put(e, "r", buf, sizeof(buf));
	assert_int_equal(ts_bunny_set(&srv, "range=0"), 0);
	smux_sink_buf(&sink, out, sizeof(out));
	assert_int_equal(
		smux_backend_get(e->b, &e->ctx, "r", &go, &sink, NULL, &err),
		0);
	assert_int_equal(sink.written, 50);
	assert_memory_equal(out, buf + 1000, 50);
	go.offset = 2900;
	go.length = SMUX_LEN_ALL;
	smux_sink_buf(&sink, out, sizeof(out));
	assert_int_equal(
		smux_backend_get(e->b, &e->ctx, "r", &go, &sink, NULL, &err),
		0);
	assert_int_equal(sink.written, 100);
	assert_memory_equal(out, buf + 2900, 100);
	env_free(e);
}

/* A server whose 206s carry less than asked (at most 16 bytes each, RFC
 * 9110 allows it): a ranged get asks again for the rest, and gets its
 * bytes whole. */
static void test_capped_range(void **state)
{
	struct env *e = env_new(0);
	unsigned char buf[3000], out[3000];
	struct smux_get_opts go = {.offset = 1000, .length = 50};
	struct smux_error err;
	struct smux_sink sink;
	long gets;
	int rc;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i % 251);
	put(e, "r", buf, sizeof(buf));
	assert_int_equal(ts_bunny_set(&srv, "range_cap=16"), 0);
	gets = stat_of("object_gets");
	smux_sink_buf(&sink, out, sizeof(out));
	rc = smux_backend_get(e->b, &e->ctx, "r", &go, &sink, NULL, &err);
	if (rc)
		fail_msg("capped: %s", err.e.message);
	assert_int_equal(sink.written, 50);
	assert_memory_equal(out, buf + 1000, 50);
	/* 16 + 16 + 16 + 2: four answers */
	assert_true(stat_of("object_gets") - gets >= 4);
	go.offset = 2950;
	go.length = SMUX_LEN_ALL;
	smux_sink_buf(&sink, out, sizeof(out));
	rc = smux_backend_get(e->b, &e->ctx, "r", &go, &sink, NULL, &err);
	if (rc)
		fail_msg("capped to the end: %s", err.e.message);
	assert_int_equal(sink.written, 50);
	assert_memory_equal(out, buf + 2950, 50);
	env_free(e);
}

static int count_cb(void *arg, const struct smux_list_entry *en)
{
	(void)en;
	(*(size_t *)arg)++;
	return 0;
}

/* Lists "g/" of @b (its listing notes the files it shows). */
static void list_g(struct env *e, struct smux_backend *b)
{
	struct smux_error err;
	size_t n = 0;

	assert_int_equal(
		smux_backend_list(b, &e->ctx, "g/", "/", count_cb, &n, &err),
		0);
	assert_true(n > 0);
}

/* Gets @key of @b (@off, @len) into @out; the bytes read. */
static size_t get_of(struct env *e, const char *key, uint64_t off, uint64_t len,
		     char *out, size_t cap, struct smux_info *info)
{
	struct smux_get_opts go = {.offset = off, .length = len};
	struct smux_error err;
	struct smux_sink sink;

	smux_sink_buf(&sink, out, cap);
	if (smux_backend_get(e->b, &e->ctx, key, &go, &sink, info, &err))
		fail_msg("get %s: %s", key, err.e.message);
	return sink.written;
}

/*
 * A whole file a listing just showed (with its Checksum) is read by one
 * GET, without the DESCRIBE first (bunny_seen.c): its bytes are taken
 * when their SHA-256 is the listed Checksum. Changed since by another
 * client, the GET's bytes are not that version: the get asks again with
 * DESCRIBE and returns the new version whole. A range, or a file the
 * backend itself put since the listing, goes by DESCRIBE.
 */
static void test_get_listed(void **state)
{
	struct env *e = env_new(0);
	struct smux_bunny_opts o = {.access_key = TS_BUNNY_KEY,
				    .zone = e->zone,
				    .endpoint = srv_url};
	struct smux_backend *other;
	struct smux_info info, head;
	struct smux_error err;
	char buf[64];
	long d0, g0;

	(void)state;
	assert_int_equal(smux_bunny_new("other", &o, &other, &err), 0);
	put(e, "g/a", "first version", 13);
	list_g(e, e->b);
	d0 = stat_of("by_method.DESCRIBE");
	g0 = stat_of("by_method.GET");
	assert_int_equal(
		get_of(e, "g/a", 0, SMUX_LEN_ALL, buf, sizeof(buf), &info), 13);
	assert_memory_equal(buf, "first version", 13);
	assert_int_equal(stat_of("by_method.DESCRIBE") - d0, 0);
	assert_int_equal(stat_of("by_method.GET") - g0, 1);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "g/a", &head, &err),
			 0);
	assert_string_equal(info.etag, head.etag);
	assert_int_equal(info.size, 13);

	/* another client's new version after the listing */
	assert_int_equal(smux_backend_put_buf(other, &e->ctx, "g/a",
					      "second version!!", 16, &err),
			 0);
	d0 = stat_of("by_method.DESCRIBE");
	g0 = stat_of("by_method.GET");
	assert_int_equal(
		get_of(e, "g/a", 0, SMUX_LEN_ALL, buf, sizeof(buf), &info), 16);
	assert_memory_equal(buf, "second version!!", 16);
	assert_int_equal(info.size, 16);
	assert_int_equal(stat_of("by_method.DESCRIBE") - d0, 1);
	assert_int_equal(stat_of("by_method.GET") - g0, 2);
	/* the note is gone: DESCRIBE again */
	d0 = stat_of("by_method.DESCRIBE");
	get_of(e, "g/a", 0, SMUX_LEN_ALL, buf, sizeof(buf), NULL);
	assert_int_equal(stat_of("by_method.DESCRIBE") - d0, 1);

	/* a range of a listed file: DESCRIBE (its size and version) */
	list_g(e, e->b);
	d0 = stat_of("by_method.DESCRIBE");
	assert_int_equal(get_of(e, "g/a", 7, 3, buf, sizeof(buf), NULL), 3);
	assert_memory_equal(buf, "ver", 3);
	assert_int_equal(stat_of("by_method.DESCRIBE") - d0, 1);

	/* put by this backend after the listing: DESCRIBE */
	put(e, "g/a", "third", 5);
	d0 = stat_of("by_method.DESCRIBE");
	assert_int_equal(
		get_of(e, "g/a", 0, SMUX_LEN_ALL, buf, sizeof(buf), NULL), 5);
	assert_memory_equal(buf, "third", 5);
	assert_int_equal(stat_of("by_method.DESCRIBE") - d0, 1);
	smux_backend_unref(other);
	env_free(e);
}

/* A wrong password (or region) is a configuration error naming the zone
 * and region, and never the password. */
static void test_wrong_key(void **state)
{
	struct smux_bunny_opts o = {.zone = TS_BUNNY_ZONE,
				    .access_key = "not-the-password",
				    .region = "ny",
				    .endpoint = srv_url};
	struct smux_backend *b;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(smux_bunny_new("bunny", &o, &b, &err), 0);
	assert_true(smux_backend_head(b, &ctx, "k", NULL, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	assert_non_null(strstr(err.e.message, "\"ny\""));
	assert_non_null(strstr(err.e.message, "\"" TS_BUNNY_ZONE "\""));
	assert_null(strstr(err.e.message, "not-the-password"));
	assert_true(smux_backend_healthcheck(b, &ctx, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	smux_backend_unref(b);
}

/*
 * Through a mux, the wrong password's configuration error is the event
 * backend.misconfigured naming the member and the key to fix (region),
 * once for many failing calls, again only 10 minutes later while it
 * lasts; a message about a long key still names the key to fix.
 */
static void test_wrong_key_event(void **state)
{
	struct smux_bunny_opts o = {.zone = TS_BUNNY_ZONE,
				    .access_key = "not-the-password",
				    .region = "ny",
				    .endpoint = srv_url};
	struct mh_events *rec = mh_events_new();
	struct smux_mux_opts mo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *b, *mux;
	struct smux_event ev;
	struct smux_error err;
	struct mh_clock clk;
	struct smux_ctx ctx;
	char key[220];

	(void)state;
	mh_clock_init(&clk, 1000000);
	mo.clock = &clk.clock;
	mo.events = rec->bus;
	smux_ctx_init(&ctx);
	assert_int_equal(smux_bunny_new("edge", &o, &b, &err), 0);
	mux = mh_mux("front", &mo, &b, NULL, 1);
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	for (int i = 0; i < 5; i++) {
		assert_true(smux_backend_head(mux, &ctx, i ? "k" : key, NULL,
					      &err) < 0);
		assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	}
	assert_int_equal(mh_events_count(rec, SMUX_EV_BACKEND_MISCONFIGURED),
			 1);
	assert_true(mh_events_last(rec, SMUX_EV_BACKEND_MISCONFIGURED, &ev));
	assert_string_equal(ev.mux, "front");
	assert_string_equal(ev.name, "edge");
	assert_string_equal(ev.option, "region");
	assert_true(ev.has_cause);
	assert_int_equal(ev.cause.code, SMUX_E_INVALID_OPTIONS);
	/* the first call's key was 219 bytes: the message still ends with
	 * the key to fix */
	assert_non_null(strstr(ev.cause.message, "(check region =)"));
	assert_non_null(strstr(ev.cause.message, "\"ny\""));
	assert_null(strstr(ev.cause.message, "not-the-password"));
	/* 9 minutes on: still once; 10 minutes: a reminder */
	mh_clock_set(&clk, 1000000 + 9 * 60 * 1000);
	assert_true(smux_backend_head(mux, &ctx, "k", NULL, &err) < 0);
	assert_int_equal(mh_events_count(rec, SMUX_EV_BACKEND_MISCONFIGURED),
			 1);
	mh_clock_set(&clk, 1000000 + 10 * 60 * 1000);
	assert_true(smux_backend_head(mux, &ctx, "k", NULL, &err) < 0);
	assert_true(smux_backend_head(mux, &ctx, "k", NULL, &err) < 0);
	assert_int_equal(mh_events_count(rec, SMUX_EV_BACKEND_MISCONFIGURED),
			 2);
	smux_backend_unref(mux);
	smux_backend_unref(b);
	mh_events_free(rec);
}

/* A file key never deletes a directory (DELETE recurses on Bunny). */
static void test_delete_no_recursion(void **state)
{
	struct env *e = env_new(0);
	struct smux_error err;
	long dels0 = stat_of("by_method.DELETE");

	(void)state;
	put(e, "d/x", "x", 1);
	put(e, "d/sub/y", "y", 1);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "d", &err), -EISDIR);
	assert_int_equal(err.e.code, SMUX_E_IS_DIRECTORY);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "d/", &err),
			 -ENOTEMPTY);
	assert_int_equal(stat_of("by_method.DELETE") - dels0, 0);
	expect_stored(e, "d/x", "x", 1);
	expect_stored(e, "d/sub/y", "y", 1);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "d/x", &err), 0);
	assert_int_equal(stat_of("by_method.DELETE") - dels0, 1);
	expect_stored(e, "d/sub/y", "y", 1);
	env_free(e);
}

/* A local copy of @len bytes of @data for @key (a temporary file). */
static struct smux_local_copy *local_of(const char *key, const void *data,
					size_t len)
{
	char path[] = "/tmp/smux-bunny-local.XXXXXX";
	int fd = mkstemp(path);
	struct smux_local_copy *lc;

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	lc = smux_local_copy_new(key, fd, len);
	assert_non_null(lc);
	return lc;
}

static void fill(char *buf, size_t len, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * 7 + salt + i / 251) & 0xff);
}

/*
 * Rename (bunny_rename.c) uploads the caller's local copy (ctx->local)
 * when it is the stored version (size and SHA-256 Checksum), else reads
 * the object first; then the old name goes. Also through a mux, whose
 * bulkhead hands the copy to its worker with a reference of its own.
 */
static void test_rename_local(void **state)
{
	struct env *e = env_new(0);
	struct smux_mux_opts mo = {.mode = SMUX_MODE_MIRROR};
	struct smux_mux_member m[2] = {{0}};
	struct smux_backend *mem, *mux;
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx = e->ctx;
	char a[5000], b[5000];
	long g0;

	(void)state;
	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	/* the copy is the stored version: no GET */
	put(e, "d/a", a, sizeof(a));
	ctx.local = local_of("d/a", a, sizeof(a));
	g0 = stat_of("object_gets");
	assert_int_equal(smux_backend_rename(e->b, &ctx, "d/a", "d/b", &err),
			 0);
	assert_int_equal(stat_of("object_gets") - g0, 0);
	assert_int_equal(smux_bunny_local_renames(e->b), 1);
	expect_stored(e, "d/b", a, sizeof(a));
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "d/a", &info, &err),
			 -ENOENT);
	smux_local_copy_unref(ctx.local);
	/* stale (same size, other bytes), or of another key: read first */
	put(e, "c", b, sizeof(b));
	ctx.local = local_of("c", a, sizeof(a));
	g0 = stat_of("object_gets");
	assert_int_equal(smux_backend_rename(e->b, &ctx, "c", "c2", &err), 0);
	assert_int_equal(stat_of("object_gets") - g0, 1);
	expect_stored(e, "c2", b, sizeof(b));
	assert_int_equal(smux_backend_rename(e->b, &ctx, "c2", "c3", &err), 0);
	assert_int_equal(stat_of("object_gets") - g0, 2);
	expect_stored(e, "c3", b, sizeof(b));
	smux_local_copy_unref(ctx.local);
	/* a stored object without a Checksum cannot be verified */
	put(e, "n", a, sizeof(a));
	assert_int_equal(ts_bunny_set(&srv, "checksums=0"), 0);
	ctx.local = local_of("n", a, sizeof(a));
	g0 = stat_of("object_gets");
	assert_int_equal(smux_backend_rename(e->b, &ctx, "n", "n2", &err), 0);
	assert_int_equal(stat_of("object_gets") - g0, 1);
	assert_int_equal(ts_bunny_set(&srv, "checksums=1"), 0);
	expect_stored(e, "n2", a, sizeof(a));
	smux_local_copy_unref(ctx.local);
	assert_int_equal(smux_bunny_local_renames(e->b), 1);
	/* through a mirror of memory and bunny: the bulkhead passes it on */
	assert_int_equal(smux_memory_new("mem", &mem, &err), 0);
	m[0].backend = mem;
	m[1].backend = e->b;
	assert_int_equal(smux_mux_new("mx", &mo, m, 2, &mux, &err), 0);
	assert_int_equal(
		smux_backend_put_buf(mux, &e->ctx, "m", a, sizeof(a), &err), 0);
	ctx.local = local_of("m", a, sizeof(a));
	g0 = stat_of("object_gets");
	assert_int_equal(smux_backend_rename(mux, &ctx, "m", "m2", &err), 0);
	smux_local_copy_unref(ctx.local); /* the call holds none now */
	assert_int_equal(stat_of("object_gets") - g0, 0);
	assert_int_equal(smux_bunny_local_renames(e->b), 2);
	expect_stored(e, "m2", a, sizeof(a));
	smux_backend_unref(mux);
	smux_backend_unref(mem);
	env_free(e);
}

/* A server whose DESCRIBE does not answer for directories: they are
 * found in their parent's listing. */
static void test_describe_no_dirs(void **state)
{
	struct env *e = env_new(0);
	struct smux_error err;
	struct smux_info info;
	struct smux_sink sink;

	(void)state;
	assert_int_equal(ts_bunny_set(&srv, "describe_dirs=0"), 0);
	put(e, "d/x", "x", 1);
	put(e, "m/", "", 0);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "d", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "m/", &info, &err),
			 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
	smux_sink_dyn(&sink);
	assert_int_equal(
		smux_backend_get(e->b, &e->ctx, "d", NULL, &sink, NULL, &err),
		-EISDIR);
	smux_sink_release(&sink);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "d", &err), -EISDIR);
	expect_stored(e, "d/x", "x", 1);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "no", NULL, &err),
			 -ENOENT);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "d/no/", NULL, &err),
			 -ENOENT);
	assert_int_equal(smux_backend_del(e->b, &e->ctx, "m/", &err), 0);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "m/", NULL, &err),
			 -ENOENT);
	assert_int_equal(ts_bunny_set(&srv, "describe_dirs=1"), 0);
	env_free(e);
}

/* A server that gives no Checksum: the version token is size and
 * LastChanged, the same from head, get and list, and a rewrite moves it. */
static void test_no_checksums(void **state)
{
	struct env *e = env_new(0);
	struct smux_info h1, h2, g;
	struct smux_error err;
	unsigned char *got;
	struct smux_sink sink;
	size_t len;

	(void)state;
	assert_int_equal(ts_bunny_set(&srv, "checksums=0"), 0);
	put(e, "k", "first", 5);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "k", &h1, &err), 0);
	assert_int_equal(strlen(h1.etag) != 64, 1);
	smux_sink_dyn(&sink);
	assert_int_equal(
		smux_backend_get(e->b, &e->ctx, "k", NULL, &sink, &g, &err), 0);
	got = smux_sink_dyn_take(&sink, &len);
	assert_int_equal(len, 5);
	assert_memory_equal(got, "first", 5);
	free(got);
	smux_sink_release(&sink);
	assert_string_equal(g.etag, h1.etag);
	assert_int_equal(
		smux_backend_put_buf(e->b, &e->ctx, "k", "second!", 7, &err),
		0);
	assert_int_equal(smux_backend_head(e->b, &e->ctx, "k", &h2, &err), 0);
	assert_string_not_equal(h2.etag, h1.etag);
	{
		/* the put's info carries the token head reports */
		struct smux_source src;
		struct smux_info p;

		smux_source_buf(&src, "third", 5);
		assert_int_equal(smux_backend_put(e->b, &e->ctx, "k", &src,
						  NULL, &p, &err),
				 0);
		assert_int_equal(
			smux_backend_head(e->b, &e->ctx, "k", &h2, &err), 0);
		assert_string_equal(p.etag, h2.etag);
	}
	assert_int_equal(ts_bunny_set(&srv, "checksums=1"), 0);
	env_free(e);
}

struct slot_arg {
	struct env *e;
	int failures;
};

static void *slot_main(void *p)
{
	struct slot_arg *a = p;
	struct smux_error err;

	for (int i = 0; i < 3; i++)
		if (smux_backend_head(a->e->b, &a->e->ctx, "s", NULL, &err) !=
		    -ENOENT)
			a->failures++;
	return NULL;
}

/* At most max_concurrency requests of one zone are in flight. */
static void test_request_slots(void **state)
{
	struct env *e = env_new(2);
	struct slot_arg args[6];
	pthread_t t[6];
	long peak;

	(void)state;
	/* the emulator holds each request 30 ms, so six threads would
	 * overlap up to six deep without the slots */
	assert_int_equal(ts_bunny_set(&srv, "delay_ms=30"), 0);
	/* inflight_max is of the whole run: the tests before ran one
	 * request at a time */
	for (int i = 0; i < 6; i++) {
		args[i] = (struct slot_arg){.e = e};
		assert_int_equal(
			pthread_create(&t[i], NULL, slot_main, &args[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
	assert_int_equal(ts_bunny_set(&srv, "delay_ms=0"), 0);
	peak = stat_of("inflight_max");
	print_message("  most requests in flight: %ld (limit 2)\n", peak);
	assert_true(peak >= 1 && peak <= 2);
	env_free(e);
}

/* type = bunny in a config file builds a working backend; a missing zone
 * is refused naming the key. */
static void test_config(void **state)
{
	char dir[] = "/tmp/smux-bunny-cfg-XXXXXX";
	char path[128], text[1024], err[512];
	struct smux_backend *root;
	struct smux_config *c;
	struct smux_error e;
	struct smux_ctx ctx;
	char zone[32];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(zone, sizeof(zone), "c%u", ++zones);
	assert_int_equal(ts_bunny_zone(&srv, zone, TS_BUNNY_KEY), 0);
	setenv("SMUX_TEST_BUNNY_KEY", TS_BUNNY_KEY, 1);
	snprintf(path, sizeof(path), "%s/smuxfs.conf", dir);
	snprintf(text, sizeof(text),
		 "[mount]\nroot = edge\nstate_dir = %s\n\n"
		 "[backend edge]\ntype = bunny\nzone = %s\nregion = uk\n"
		 "endpoint = %s\ncredentials_env = SMUX_TEST_BUNNY_KEY\n"
		 "max_concurrency = 2\n",
		 dir, zone, srv_url);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	if (smux_config_load(path, &c, err, sizeof(err)))
		fail_msg("load: %s", err);
	if (smux_config_build(c, NULL, &root, err, sizeof(err)))
		fail_msg("build: %s", err);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_backend_put_buf(root, &ctx, "hi", "hi", 2, &e),
			 0);
	smux_backend_unref(root);
	smux_config_free(c);

	/* no zone: refused at load, naming the key */
	snprintf(text, sizeof(text),
		 "[mount]\nroot = edge\nstate_dir = %s\n\n"
		 "[backend edge]\ntype = bunny\n"
		 "credentials_env = SMUX_TEST_BUNNY_KEY\n",
		 dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_true(smux_config_load(path, &c, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "zone: missing"));

	/* a region Bunny does not have: refused at load, naming the key */
	snprintf(text, sizeof(text),
		 "[mount]\nroot = edge\nstate_dir = %s\n\n"
		 "[backend edge]\ntype = bunny\nzone = z\nregion = mars\n"
		 "credentials_env = SMUX_TEST_BUNNY_KEY\n",
		 dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_true(smux_config_load(path, &c, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "region: unknown"));
	unsetenv("SMUX_TEST_BUNNY_KEY");
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_time_parse),
		cmocka_unit_test(test_json_hostile),
		cmocka_unit_test(test_options),
	};
	const struct CMUnitTest emu[] = {
		cmocka_unit_test(test_put_stored),
		cmocka_unit_test(test_429_burst),
		cmocka_unit_test(test_5xx_burst),
		cmocka_unit_test(test_checksum_retry),
		cmocka_unit_test(test_given_checksum),
		cmocka_unit_test(test_no_range),
		cmocka_unit_test(test_capped_range),
		cmocka_unit_test(test_get_listed),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_delete_no_recursion),
		cmocka_unit_test(test_rename_local),
		cmocka_unit_test(test_describe_no_dirs),
		cmocka_unit_test(test_no_checksums),
		cmocka_unit_test(test_request_slots),
		cmocka_unit_test(test_wrong_key_event),
		cmocka_unit_test(test_config),
	};
	int rc = cmocka_run_group_tests_name("bunny (no server)", pure, NULL,
					     NULL);

	rc += cmocka_run_group_tests_name("bunny (emulator)", emu, group_setup,
					  group_teardown);
	return rc;
}
