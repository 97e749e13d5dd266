// SPDX-License-Identifier: MIT
/*
 * test_s3.c - the s3 backend against a scripted server on loopback
 * (tests/servers/s3_hostile.py): broken and hostile answers are errors,
 * never crashes or partial listings taken for whole ones; S3 error
 * documents map to the right codes; a failed multipart upload is aborted
 * (the server lists no open upload after it); a server that ignores
 * If-Match cannot hand another version to a pinned get; credentials never
 * appear in an error. Options are checked at smux_s3_new. The writer
 * (s3_writer.c) streams a multipart upload while the file is written, and
 * aborts it on close and on failure (bucket "parts"). del_many sends
 * DeleteObjects requests (checked by the server: Content-MD5, payload
 * hash, the document), maps each key's Error, and falls back to one DELETE
 * a key on a server without it (buckets "delmany", "nodel-501/405").
 *
 * The conformance suite runs the backend against Swift and s3rver
 * (`make check-s3`); this test is the fast, deterministic part that
 * `make check` runs.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include "smux/s3.h"
#include "support/test_server.h"

#define SECRET "wJalrXUtnFEMI-secret-never-shown"
#define ACCESS "AKIDEXAMPLEACCESS"

static struct ts_server srv;
static char dir[64] = "/tmp/smux-test-s3-XXXXXX";
static char endpoint[64];

static int start(void **state)
{
	char script[PATH_MAX], py[PATH_MAX], portfile[PATH_MAX];
	char *argv[4];

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	if (ts_find_file("tests/servers/s3_hostile.py", script,
			 sizeof(script)) < 0 ||
	    ts_find_exe("python3", py, sizeof(py)) < 0) {
		print_error("s3_hostile.py or python3 missing\n");
		return -1;
	}
	snprintf(portfile, sizeof(portfile), "%s/port", dir);
	argv[0] = py;
	argv[1] = script;
	argv[2] = portfile;
	argv[3] = NULL;
	if (ts_server_start(&srv, argv, NULL, portfile, 0, 20000) < 0)
		return -1;
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", srv.port);
	return 0;
}

static void dellog_reset(void);

static int stop(void **state)
{
	char port[80];

	(void)state;
	ts_server_stop(&srv);
	snprintf(port, sizeof(port), "%s/port", dir);
	unlink(port);
	snprintf(port, sizeof(port), "%s/port.uploads", dir);
	unlink(port);
	snprintf(port, sizeof(port), "%s/port.parts", dir);
	unlink(port);
	snprintf(port, sizeof(port), "%s/port.md5", dir);
	unlink(port);
	dellog_reset();
	rmdir(dir);
	return 0;
}

/* A backend on @bucket of the scripted server, one attempt per request
 * (the answers are deliberate: retrying them only costs time). */
static struct smux_backend *open_bucket(const char *bucket, uint64_t part)
{
	struct smux_s3_opts o = {
		.endpoint = endpoint,
		.bucket = bucket,
		.path_style = true,
		.access_key = ACCESS,
		.secret_key = SECRET,
		.max_attempts = 1,
		.part_size = part,
		.multipart_threshold = part, /* parts above one part */
	};
	struct smux_backend *b = NULL;
	struct smux_error err;

	if (smux_s3_new(bucket, &o, &b, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	return b;
}

static int count_cb(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(int *)arg)++;
	return 0;
}

static void assert_no_secret(const struct smux_error *err)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	smux_error_format(err, buf, sizeof(buf));
	assert_null(strstr(buf, SECRET));
}

static void expect_code(int rc, const struct smux_error *err,
			enum smux_code code)
{
	assert_true(rc < 0);
	if (err->e.code != code)
		fail_msg("expected %s, got %s: %s", smux_code_name(code),
			 smux_code_name(err->e.code), err->e.message);
	assert_no_secret(err);
}

/* Listings that are not XML, cut short, outside the prefix, or that
 * never end are BAD_RESPONSE, with no entry passed on as a listing. */
static void test_hostile_listings(void **state)
{
	static const char *const buckets[] = {"garbage", "trunc", "outside",
					      "loop"};
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
		struct smux_backend *b = open_bucket(buckets[i], 0);
		int n = 0;
		int rc = smux_backend_list(b, &ctx, "mine/", NULL, count_cb, &n,
					   &err);

		print_message("  %s: %s\n", buckets[i], err.e.message);
		expect_code(rc, &err, SMUX_E_BAD_RESPONSE);
		smux_backend_unref(b);
	}
}

/* A body cut short is an error, not a short object. */
static void test_truncated_body(void **state)
{
	struct smux_backend *b = open_bucket("trunc", 0);
	unsigned char *buf = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len = 0;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	rc = smux_backend_get_all(b, &ctx, "obj", &buf, &len, &err);
	assert_true(rc < 0);
	print_message("  truncated: %s: %s\n", smux_code_name(err.e.code),
		      err.e.message);
	assert_true(err.e.code == SMUX_E_BAD_RESPONSE ||
		    err.e.code == SMUX_E_CONNECTION);
	assert_no_secret(&err);
	free(buf);
	smux_backend_unref(b);
}

/* Answers that are not the range asked for, whole, are BAD_RESPONSE: a
 * 206 for another range (read as the asked one: the file's second MiB a
 * copy of its first) and a body cut short on an answer without
 * Content-Length (libcurl says success) were handed on as the content; so
 * are the follow-ups of a 206 that covered less than asked. */
static void test_hostile_ranges(void **state)
{
	static const char *const bad[] = {"other", "eofclose", "cap200",
					  "capother"};
	struct smux_backend *b = open_bucket("ranges", 0);
	struct smux_get_opts go = {.offset = 50, .length = 40};
	unsigned char buf[128];
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	smux_sink_buf(&sink, buf, sizeof(buf));
	assert_int_equal(
		smux_backend_get(b, &ctx, "good", &go, &sink, NULL, &err), 0);
	assert_int_equal(sink.written, 40);
	assert_int_equal(buf[0], (50 * 7 + 3) & 0xFF);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		smux_sink_buf(&sink, buf, sizeof(buf));
		rc = smux_backend_get(b, &ctx, bad[i], &go, &sink, NULL, &err);
		print_message("  %s: %s\n", bad[i], err.e.message);
		expect_code(rc, &err, SMUX_E_BAD_RESPONSE);
	}
	/* a 206 covering less than asked (at most 16 bytes an answer: RFC
	 * 9110 allows it) was BAD_RESPONSE: the rest is asked for */
	smux_sink_buf(&sink, buf, sizeof(buf));
	rc = smux_backend_get(b, &ctx, "capped", &go, &sink, NULL, &err);
	if (rc != 0)
		fail_msg("capped: rc %d, %s", rc, err.e.message);
	assert_int_equal(sink.written, 40);
	for (int i = 0; i < 40; i++)
		assert_int_equal(buf[i], ((50 + i) * 7 + 3) & 0xFF);
	smux_sink_buf(&sink, buf, sizeof(buf));
	assert_int_equal(
		smux_backend_get(b, &ctx, "trickle", &go, &sink, NULL, &err),
		0);
	assert_int_equal(sink.written, 40);
	/* another version in each answer: never spliced */
	smux_sink_buf(&sink, buf, sizeof(buf));
	rc = smux_backend_get(b, &ctx, "drift", &go, &sink, NULL, &err);
	print_message("  drift: %s\n", err.e.message);
	expect_code(rc, &err, SMUX_E_PRECONDITION_FAILED);
	smux_backend_unref(b);
}

/* A put carries its body's Content-MD5 (the server refuses a body that
 * did not arrive whole), and an answer whose ETag is the MD5 of another
 * body fails: a server that acknowledged half of it was taken at its
 * word. */
static void test_put_md5(void **state)
{
	struct smux_backend *b = open_bucket("liar", 0);
	char path[PATH_MAX], sent[64] = "";
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	FILE *f;

	(void)state;
	smux_ctx_init(&ctx);
	smux_source_buf(&src, "0123456789", 10);
	expect_code(smux_backend_put(b, &ctx, "k", &src, NULL, NULL, &err),
		    &err, SMUX_E_BAD_RESPONSE);
	print_message("  %s\n", err.e.message);
	assert_non_null(strstr(err.e.message, "another body"));
	snprintf(path, sizeof(path), "%s/port.md5", dir);
	f = fopen(path, "re");
	assert_non_null(f);
	assert_non_null(fgets(sent, sizeof(sent), f));
	fclose(f);
	/* base64 of MD5("0123456789") */
	assert_string_equal(sent, "eB5eJF1ptWaXm4bijSPyxw==");
	smux_backend_unref(b);
	/* an SSE-KMS object's ETag is no MD5 of it: not compared */
	b = open_bucket("kms", 0);
	assert_int_equal(smux_backend_put(b, &ctx, "k", &src, NULL, NULL, &err),
			 0);
	smux_backend_unref(b);
}

/* S3 error documents map to smux codes; a copy answered 200 with an
 * <Error> body failed. */
static void test_error_documents(void **state)
{
	struct smux_backend *b = open_bucket("errors", 0);
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned char *buf = NULL;
	size_t len;

	(void)state;
	smux_ctx_init(&ctx);
	expect_code(smux_backend_get_all(b, &ctx, "nope", &buf, &len, &err),
		    &err, SMUX_E_KEY_NOT_FOUND);
	expect_code(smux_backend_get_all(b, &ctx, "denied", &buf, &len, &err),
		    &err, SMUX_E_PERMISSION_DENIED);
	assert_non_null(strstr(err.e.message, "SignatureDoesNotMatch"));
	assert_int_equal(smux_backend_head(b, &ctx, "src", &info, &err), 0);
	expect_code(smux_backend_copy(b, &ctx, "src", "dst", &err), &err,
		    SMUX_E_HTTP);
	assert_non_null(strstr(err.e.message, "InternalError"));
	smux_backend_unref(b);
}

/* A server that ignores If-Match: the pinned get still fails and hands
 * over nothing. */
static void test_pin_checked(void **state)
{
	struct smux_backend *b = open_bucket("stale", 0);
	struct smux_get_opts o = {.length = SMUX_LEN_ALL, .if_match = "mine"};
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	char buf[64];

	(void)state;
	smux_ctx_init(&ctx);
	smux_sink_buf(&sink, buf, sizeof(buf));
	expect_code(smux_backend_get(b, &ctx, "k", &o, &sink, NULL, &err), &err,
		    SMUX_E_PRECONDITION_FAILED);
	assert_int_equal(sink.written, 0);
	smux_backend_unref(b);
}

/* A count the server keeps in the file port.@what. */
static long server_count(const char *what)
{
	char path[PATH_MAX], out[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/port.%s", dir, what);
	f = fopen(path, "re");
	assert_non_null(f);
	if (!fgets(out, sizeof(out), f))
		out[0] = '\0';
	fclose(f);
	return strtol(out, NULL, 10);
}

/* The server's count of open multipart uploads. */
static long open_uploads(void)
{
	return server_count("uploads");
}

/* A multipart upload whose parts fail is aborted: no upload is left. */
static void test_multipart_aborted(void **state)
{
	const uint64_t part = SMUX_S3_PART_MIN;
	struct smux_backend *b = open_bucket("mpu", part);
	size_t n = (size_t)(part * 3 + 17);
	unsigned char *data = calloc(1, n);
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	assert_non_null(data);
	smux_ctx_init(&ctx);
	assert_int_equal(open_uploads(), 0);
	smux_source_buf(&src, data, n);
	expect_code(smux_backend_put(b, &ctx, "big", &src, NULL, NULL, &err),
		    &err, SMUX_E_HTTP);
	print_message("  failed upload: %s\n", err.e.message);
	assert_int_equal(open_uploads(), 0);
	free(data);
	smux_backend_unref(b);
}

static size_t keep_body(char *p, size_t sz, size_t n, void *arg)
{
	char *buf = arg;
	size_t have = strlen(buf), len = sz * n;

	if (have + len >= 512)
		len = 511 - have;
	memcpy(buf + have, p, len);
	buf[have + len] = '\0';
	return sz * n;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (long)strlen(text));
	close(fd);
}

/* Starts an upload of @key on the scripted server, as a run would that
 * is then killed, and writes its record into @jdir as that run did; the
 * record's path in @rec. */
static void orphan_record(const char *jdir, const char *key, char *rec,
			  size_t reclen)
{
	char url[128], body[512] = "", id[64], text[160];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	struct curl_slist *hdrs;
	const char *p, *q;
	CURL *c;

	c = curl_easy_init();
	assert_non_null(c);
	snprintf(url, sizeof(url), "%s/mpu/%s?uploads", endpoint, key);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	/* the scripted server looks at the scheme only */
	hdrs = curl_slist_append(NULL, "Authorization: AWS4-HMAC-SHA256 "
				       "Credential=x");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	p = strstr(body, "<UploadId>");
	q = p ? strstr(p, "</UploadId>") : NULL;
	if (!p || !q) {
		fail_msg("no UploadId in: %s", body);
		return;
	}
	p += strlen("<UploadId>");
	assert_true(q - p > 0 && q - p < (long)sizeof(id));
	memcpy(id, p, (size_t)(q - p));
	id[q - p] = '\0';
	assert_int_equal(
		EVP_Digest(id, strlen(id), md, &mdlen, EVP_sha256(), NULL), 1);
	snprintf(rec, reclen, "%s/", jdir);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(rec + strlen(rec), 3, "%02x", md[i]);
	snprintf(text, sizeof(text), "smux-s3-upload 1\n%s\n%s", id, key);
	write_file(rec, text);
}

/* A backend on the scripted store's bucket "mpu" with the upload journal
 * @jdir. */
static struct smux_s3_opts journal_opts(const char *jdir)
{
	struct smux_s3_opts o = {
		.endpoint = endpoint,
		.bucket = "mpu",
		.path_style = true,
		.access_key = ACCESS,
		.secret_key = SECRET,
		.max_attempts = 1,
		.upload_journal = jdir,
	};

	return o;
}

/* Waits (bounded) until no upload is open and @rec is gone. */
static void wait_swept(const char *rec)
{
	for (int i = 0; i < 1000 && (open_uploads() || access(rec, F_OK) == 0);
	     i++)
		usleep(10000);
	assert_int_equal(open_uploads(), 0);
	assert_int_not_equal(access(rec, F_OK), 0);
}

/*
 * The journal of uploads in flight: what a killed run left there (an
 * upload the server still holds) is aborted in the background by the next
 * backend opened on it, and its record removed; a record that does not
 * parse is left alone.
 */
static void test_orphans_aborted(void **state)
{
	char jdir[PATH_MAX], rec[PATH_MAX + 80], bad[PATH_MAX + 80];
	struct smux_s3_opts o = journal_opts(jdir);
	struct smux_backend *b = NULL;
	struct smux_error err;

	(void)state;
	snprintf(jdir, sizeof(jdir), "%s/journal", dir);
	assert_int_equal(mkdir(jdir, 0700), 0);
	/* an upload started by a run that was then killed, its record, and
	 * a hostile one */
	orphan_record(jdir, "orphan", rec, sizeof(rec));
	assert_int_equal(open_uploads(), 1);
	snprintf(bad, sizeof(bad), "%s/%064d", jdir, 0);
	write_file(bad, "smux-s3-upload 1\nno key\n");

	if (smux_s3_new("mpu", &o, &b, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	wait_swept(rec);
	assert_int_equal(access(bad, F_OK), 0);
	smux_backend_unref(b);
	unlink(bad);
	assert_int_equal(rmdir(jdir), 0);
}

/*
 * The journal is the live backend's while it is open: a second backend
 * opened on the same journal (the same config mounted twice, or a reload
 * building the member anew beside the running one) must not abort the
 * first one's uploads in flight, which would fail their completion; once
 * no live backend holds it, the next one opened sweeps what is left.
 */
static void test_orphans_live_kept(void **state)
{
	char jdir[PATH_MAX], rec[PATH_MAX + 80];
	struct smux_s3_opts o = journal_opts(jdir);
	struct smux_backend *live = NULL, *second = NULL, *next = NULL;
	struct smux_error err;

	(void)state;
	snprintf(jdir, sizeof(jdir), "%s/journal-live", dir);
	if (smux_s3_new("mpu", &o, &live, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	/* an upload of the live backend's, journaled as it journals one */
	orphan_record(jdir, "in-flight", rec, sizeof(rec));
	assert_int_equal(open_uploads(), 1);
	if (smux_s3_new("mpu", &o, &second, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	usleep(300000); /* a sweeper starts at once: give it time to act */
	assert_int_equal(open_uploads(), 1);
	assert_int_equal(access(rec, F_OK), 0);
	smux_backend_unref(second);
	smux_backend_unref(live);
	/* the live run is gone (killed, say): its upload is an orphan now */
	if (smux_s3_new("mpu", &o, &next, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	wait_swept(rec);
	smux_backend_unref(next);
	assert_int_equal(rmdir(jdir), 0);
}

static int name_cb(void *arg, const struct smux_list_entry *e)
{
	char *names = arg;

	strncat(names, e->key, 63 - strlen(names));
	strncat(names, ";", 63 - strlen(names));
	return 0;
}

/*
 * The object the backend's prefix names itself ("res/" of prefix res/:
 * the folder an S3 console's "Create folder" makes) is the root's own
 * marker, listed as no key: a rejoin's resync copied the key "" and
 * failed with INVALID_KEY once a second, forever (outside tester s40-t2).
 */
static void test_prefix_folder_object(void **state)
{
	struct smux_s3_opts o = {
		.endpoint = endpoint,
		.bucket = "folder",
		.prefix = "res/",
		.path_style = true,
		.access_key = ACCESS,
		.secret_key = SECRET,
		.max_attempts = 1,
	};
	struct smux_backend *b = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	char names[64] = "";

	(void)state;
	smux_ctx_init(&ctx);
	if (smux_s3_new("folder", &o, &b, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	assert_int_equal(
		smux_backend_list(b, &ctx, "", NULL, name_cb, names, &err), 0);
	assert_string_equal(names, "a;");
	names[0] = '\0';
	assert_int_equal(
		smux_backend_list(b, &ctx, "", "/", name_cb, names, &err), 0);
	assert_string_equal(names, "a;");
	smux_backend_unref(b);
}

/* Plain round trip through the scripted store, keys with awkward bytes. */
static void test_roundtrip(void **state)
{
	static const char *const keys[] = {"a b+c%d*e", "\xc3\xa9t\xc3\xa9",
					   "ctrl\x01x", "q?x#y&z=1"};
	struct smux_backend *b = open_bucket("okay", 0);
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned char *buf;
	size_t len;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (smux_backend_put_buf(b, &ctx, keys[i], keys[i],
					 strlen(keys[i]), &err))
			fail_msg("put %s: %s", keys[i], err.e.message);
		if (smux_backend_get_all(b, &ctx, keys[i], &buf, &len, &err))
			fail_msg("get %s: %s", keys[i], err.e.message);
		assert_int_equal(len, strlen(keys[i]));
		assert_memory_equal(buf, keys[i], len);
		free(buf);
		assert_int_equal(smux_backend_del(b, &ctx, keys[i], &err), 0);
	}
	smux_backend_unref(b);
}

/*
 * Owners are kept (x-amz-meta-uid/gid, as s3fs writes them): without
 * SMUX_CAP_OWNER the daemon refused chown on an s3 tree with EPERM.
 */
static void test_keeps_owners(void **state)
{
	struct smux_backend *b = open_bucket("okay", 0);

	(void)state;
	assert_true(smux_backend_caps(b) & SMUX_CAP_OWNER);
	smux_backend_unref(b);
}

/* ---- del_many: DeleteObjects ---- */

/* The server's file port.@what, whole, in a heap string (*@len bytes). */
static char *server_file(const char *what, size_t *len)
{
	char path[PATH_MAX];
	unsigned char *buf = NULL;
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/port.%s", dir, what);
	f = fopen(path, "re");
	if (!f) {
		*len = 0;
		return strdup("");
	}
	buf = malloc(4u << 20);
	assert_non_null(buf);
	n = fread(buf, 1, (4u << 20) - 1, f);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return (char *)buf;
}

/* Forgets what the server logged of deletes. */
static void dellog_reset(void)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/port.dellog", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/port.delbody", dir);
	unlink(path);
}

/* Lines of the delete log starting with @start. */
static int dellog_count(const char *log, const char *start)
{
	int n = 0;

	for (const char *l = log; *l; l = strchr(l, '\n') + 1) {
		if (!strncmp(l, start, strlen(start)))
			n++;
		if (!strchr(l, '\n'))
			break;
	}
	return n;
}

/* The base64 MD5 of @len bytes at @data (Content-MD5). */
static void md5_b64(const void *data, size_t len, char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	assert_int_equal(EVP_Digest(data, len, md, &mdlen, EVP_md5(), NULL), 1);
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

static void put_small(struct smux_backend *b, const char *key)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	if (smux_backend_put_buf(b, &ctx, key, "x", 1, &err))
		fail_msg("put %s: %s", key, err.e.message);
}

static void expect_gone(struct smux_backend *b, const char *key)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	expect_code(smux_backend_head(b, &ctx, key, &info, &err), &err,
		    SMUX_E_KEY_NOT_FOUND);
}

/*
 * The request: a POST of ?delete to the bucket with a Content-MD5 of its
 * body (checked here and by the server, as is the payload hash), a Quiet
 * Delete document of the keys escaped, each key once; more than 1000 keys
 * in two requests; keys the XML cannot carry as DELETEs of their own.
 */
static void test_delete_many_request(void **state)
{
	static const char *const awkward[] = {
		"a&b<c>\"d'e", "sp ace", "\xc3\xa9t\xc3\xa9/x",
		"ctrl\x01x",   "tab\tx", " lead",
		"trail ",      "0123",	 "bad\xff",
		"dup",	       "dup",
	};
	const size_t na = sizeof(awkward) / sizeof(awkward[0]);
	const size_t n = 1500 + na;
	struct smux_backend *b = open_bucket("delmany", 0);
	const char **keys = calloc(n, sizeof(*keys));
	char(*names)[16] = calloc(1500, sizeof(*names));
	int *rcs = calloc(n, sizeof(*rcs));
	char md5[32], want_md5[80], *log, *body;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len;

	(void)state;
	assert_non_null(keys);
	assert_non_null(names);
	assert_non_null(rcs);
	assert_true(smux_backend_caps(b) & SMUX_CAP_DEL_MANY);
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < 1500; i++) {
		snprintf(names[i], sizeof(names[i]), "k%04zu", i);
		keys[i] = names[i];
	}
	for (size_t i = 0; i < na; i++)
		keys[1500 + i] = awkward[i];
	for (size_t i = 0; i < n; i += 97)
		put_small(b, keys[i]);
	put_small(b, "ctrl\x01x");
	put_small(b, "a&b<c>\"d'e");
	dellog_reset();
	assert_int_equal(smux_backend_del_many(b, &ctx, keys, n, rcs, &err), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rcs[i], 0);
	for (size_t i = 0; i < n; i += 97)
		expect_gone(b, keys[i]);
	expect_gone(b, "ctrl\x01x");
	expect_gone(b, "a&b<c>\"d'e");
	log = server_file("dellog", &len);
	print_message("%s", log);
	/* 1000 keys, then the other 500 and the 4 awkward ones XML carries
	 * (the keys sort "a&b.." "dup" "k0000".. "sp ace" "\xc3\xa9t.."),
	 * "dup" once */
	assert_int_equal(dellog_count(log, "POST delete"), 2);
	assert_non_null(strstr(log, "keys=1000 quiet=true"));
	assert_non_null(strstr(log, "keys=504 quiet=true"));
	/* one DELETE each for control characters, blanks at an end, a
	 * number and bytes that are not UTF-8 */
	assert_int_equal(dellog_count(log, "DELETE "), 6);
	assert_non_null(strstr(log, "DELETE ctrl%01x\n"));
	assert_non_null(strstr(log, "DELETE tab%09x\n"));
	assert_non_null(strstr(log, "DELETE %20lead\n"));
	assert_non_null(strstr(log, "DELETE trail%20\n"));
	assert_non_null(strstr(log, "DELETE 0123\n"));
	assert_non_null(strstr(log, "DELETE bad%EF%BF%BD\n")); /* replaced */
	free(log);
	assert_int_equal(smux_s3_delete_objects_count(b), 2);

	/* a small one, byte for byte, and its Content-MD5 */
	dellog_reset();
	keys[0] = "plain";
	keys[1] = "a&b<c>\"d'e";
	keys[2] = "plain";
	assert_int_equal(smux_backend_del_many(b, &ctx, keys, 3, rcs, &err), 0);
	body = server_file("delbody", &len);
	assert_string_equal(body,
			    "<Delete xmlns=\"http://s3.amazonaws.com/doc/"
			    "2006-03-01/\"><Quiet>true</Quiet>"
			    "<Object><Key>a&amp;b&lt;c&gt;&quot;d&apos;e</Key>"
			    "</Object><Object><Key>plain</Key></Object>"
			    "</Delete>");
	md5_b64(body, len, md5);
	snprintf(want_md5, sizeof(want_md5), "md5=%s\n", md5);
	log = server_file("dellog", &len);
	assert_non_null(strstr(log, "POST delete keys=2 quiet=true "));
	assert_non_null(strstr(log, want_md5));
	assert_int_equal(smux_s3_delete_objects_count(b), 3);
	free(log);
	free(body);
	free(names);
	free(keys);
	free(rcs);
	smux_backend_unref(b);
}

/*
 * The answer: an Error for one key fails that key only (AccessDenied a
 * permission error, SlowDown a transient one), NoSuchKey is gone; a
 * failed request (500) fails every key of it; an answer that is not XML
 * or names a key not asked for is BAD_RESPONSE.
 */
static void test_delete_many_answers(void **state)
{
	struct smux_backend *b = open_bucket("delmany", 0);
	const char *keys[4];
	struct smux_error err;
	struct smux_ctx ctx;
	int rcs[4], rc;

	(void)state;
	smux_ctx_init(&ctx);
	put_small(b, "one");
	put_small(b, "two");
	keys[0] = "one";
	keys[1] = "denied&<x>";
	keys[2] = "gone";
	keys[3] = "two";
	rc = smux_backend_del_many(b, &ctx, keys, 4, rcs, &err);
	expect_code(rc, &err, SMUX_E_PERMISSION_DENIED);
	print_message("  denied: %s\n", err.e.message);
	assert_non_null(strstr(err.e.message, "denied&<x>"));
	assert_int_equal(rc, rcs[1]);
	assert_int_equal(rcs[1], -EACCES);
	assert_int_equal(rcs[0], 0);
	assert_int_equal(rcs[2], 0);
	assert_int_equal(rcs[3], 0);
	expect_gone(b, "one");
	expect_gone(b, "two");

	keys[0] = "slow";
	keys[1] = "fine";
	rc = smux_backend_del_many(b, &ctx, keys, 2, rcs, &err);
	expect_code(rc, &err, SMUX_E_HTTP);
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);
	assert_non_null(strstr(err.e.message, "\"slow\": SlowDown"));
	assert_true(rcs[0] < 0);
	assert_int_equal(rcs[1], 0);

	keys[0] = "fail";
	keys[1] = "fine";
	rc = smux_backend_del_many(b, &ctx, keys, 2, rcs, &err);
	expect_code(rc, &err, SMUX_E_HTTP);
	assert_int_equal(rcs[0], rc);
	assert_int_equal(rcs[1], rc);

	keys[0] = "garbage";
	rc = smux_backend_del_many(b, &ctx, keys, 2, rcs, &err);
	expect_code(rc, &err, SMUX_E_BAD_RESPONSE);
	assert_int_equal(rcs[0], rc);
	assert_int_equal(rcs[1], rc);

	keys[0] = "stranger";
	rc = smux_backend_del_many(b, &ctx, keys, 2, rcs, &err);
	expect_code(rc, &err, SMUX_E_BAD_RESPONSE);
	print_message("  stranger: %s\n", err.e.message);
	assert_int_equal(rcs[0], rc);
	assert_int_equal(rcs[1], rc);
	smux_backend_unref(b);
}

/* A server without DeleteObjects (501, or 405 with an HTML page): one
 * DELETE a key, and the next calls do not ask again. */
static void test_delete_many_fallback(void **state)
{
	static const char *const buckets[] = {"nodel-501", "nodel-405"};
	const char *keys[3] = {"a", "b c", "d&e"};
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len;
	int rcs[3];
	char *log;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < 2; i++) {
		struct smux_backend *b = open_bucket(buckets[i], 0);

		for (size_t k = 0; k < 3; k++)
			put_small(b, keys[k]);
		dellog_reset();
		assert_int_equal(
			smux_backend_del_many(b, &ctx, keys, 3, rcs, &err), 0);
		for (size_t k = 0; k < 3; k++) {
			assert_int_equal(rcs[k], 0);
			expect_gone(b, keys[k]);
		}
		log = server_file("dellog", &len);
		assert_int_equal(dellog_count(log, "POST delete"), 1);
		assert_int_equal(dellog_count(log, "DELETE "), 3);
		free(log);
		/* remembered: no POST again */
		put_small(b, "a");
		assert_int_equal(
			smux_backend_del_many(b, &ctx, keys, 3, rcs, &err), 0);
		expect_gone(b, "a");
		log = server_file("dellog", &len);
		assert_int_equal(dellog_count(log, "POST delete"), 1);
		assert_int_equal(dellog_count(log, "DELETE "), 6);
		free(log);
		assert_int_equal(smux_s3_delete_objects_count(b), 1);
		smux_backend_unref(b);
	}
}

/* Options are checked; errors name the option, never a credential. */
static void test_options(void **state)
{
	struct smux_s3_opts o = {.endpoint = "http://127.0.0.1:1",
				 .bucket = "ok",
				 .access_key = ACCESS,
				 .secret_key = SECRET};
	struct smux_backend *b = NULL;
	struct smux_error err;

	(void)state;
	o.bucket = "x";
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	o.bucket = "okay";
	o.endpoint = "ftp://h";
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	o.endpoint = "http://user:pw@h";
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	o.endpoint = "http://h";
	o.prefix = "no-slash";
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	o.prefix = NULL;
	o.part_size = 1024;
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	o.part_size = 0;
	o.multipart_threshold = SMUX_S3_SINGLE_MAX + 1;
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	assert_non_null(strstr(err.e.message, "multipart_threshold"));
	o.multipart_threshold = 0;
	o.secret_key = NULL;
	expect_code(smux_s3_new("o", &o, &b, &err), &err,
		    SMUX_E_INVALID_OPTIONS);
	assert_null(b);
}

/* ---- the writer: a multipart upload started while writing ---- */

#define WPART SMUX_S3_PART_MIN

/* The server's count of part PUTs so far (bucket "parts"). */
static long parts_sent(void)
{
	return server_count("parts");
}

/* Waits (bounded, not timed) until at least @n parts were sent. */
static void wait_parts(long n)
{
	for (int i = 0; i < 3000 && parts_sent() < n; i++)
		usleep(10000);
	if (parts_sent() < n)
		fail_msg("only %ld of %ld parts sent", parts_sent(), n);
}

/* A backend on bucket "parts": @parallel parts in flight, one PUT up to
 * @threshold bytes. */
static struct smux_backend *open_parts_at(unsigned parallel, uint64_t threshold)
{
	struct smux_s3_opts o = {
		.endpoint = endpoint,
		.bucket = "parts",
		.path_style = true,
		.access_key = ACCESS,
		.secret_key = SECRET,
		.max_attempts = 1,
		.part_size = WPART,
		.part_parallel = parallel,
		.multipart_threshold = threshold,
	};
	struct smux_backend *b = NULL;
	struct smux_error err;

	if (smux_s3_new("parts", &o, &b, &err) != 0)
		fail_msg("smux_s3_new: %s", err.e.message);
	return b;
}

/* The same, streaming above one part. */
static struct smux_backend *open_parts(unsigned parallel)
{
	return open_parts_at(parallel, WPART);
}

static struct smux_writer *wopen(struct smux_backend *b, const char *key)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	if (smux_backend_writer_open(b, &ctx, key, SMUX_WRITER_TRUNC, &w, &err))
		fail_msg("writer_open %s: %s", key, err.e.message);
	return w;
}

/* Writes @len bytes of @ref at @off, 1 MiB at a time, and mirrors them
 * into @ref. */
static void wwrite(struct smux_writer *w, unsigned char *ref, uint64_t off,
		   size_t len, unsigned seed)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (size_t i = 0; i < len; i++)
		ref[off + i] =
			(unsigned char)((uint64_t)seed * 131 + (off + i) * 7 +
					(off + i) / 4093);
	for (size_t done = 0; done < len;) {
		size_t n = len - done < (1u << 20) ? len - done : (1u << 20);

		if (smux_writer_pwrite(w, &ctx, ref + off + done, n, off + done,
				       &err))
			fail_msg("pwrite: %s", err.e.message);
		done += n;
	}
}

/* The object @key holds exactly @len bytes of @ref. */
static void expect_object(struct smux_backend *b, const char *key,
			  const unsigned char *ref, size_t len)
{
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned char *buf;
	size_t got;

	smux_ctx_init(&ctx);
	if (smux_backend_get_all(b, &ctx, key, &buf, &got, &err))
		fail_msg("get %s: %s", key, err.e.message);
	assert_int_equal(got, len);
	assert_true(memcmp(buf, ref, len) == 0);
	free(buf);
}

/* The object @key has @mode and @mtime (the commit's). */
static void expect_attrs(struct smux_backend *b, const char *key, uint32_t mode,
			 int64_t mtime)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	assert_int_equal(smux_backend_head(b, &ctx, key, &info, &err), 0);
	assert_int_equal(info.mode & 07777, mode);
	assert_true(info.mtime_ns == mtime);
}

static void wcommit_fails(struct smux_writer *w)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	expect_code(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err,
		    SMUX_E_HTTP);
}

static void wcommit(struct smux_writer *w, uint32_t mode, int64_t mtime)
{
	struct smux_put_opts po = {
		.mode = mode, .flags = SMUX_PUT_MODE, .mtime_ns = mtime};
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	if (smux_writer_commit(w, &ctx, &po, NULL, &err))
		fail_msg("commit: %s", err.e.message);
}

/* Closes @w, deletes its committed object and frees @ref and @b. */
static void wdone(struct smux_backend *b, struct smux_writer *w,
		  const char *key, unsigned char *ref)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	smux_writer_close(w);
	assert_int_equal(smux_backend_del(b, &ctx, key, &err), 0);
	free(ref);
	smux_backend_unref(b);
}

/*
 * A writer of 3.5 parts written in order sends its full parts before the
 * commit (the server counts them while the upload is open); the commit
 * sends the last, completes, and the object is byte-exact with the
 * commit's mode and mtime. Before the s3 writer, writer_open answered
 * NOT_SUPPORTED and the daemon uploaded everything at close.
 */
static void test_writer_streams(void **state)
{
	struct smux_backend *b = open_parts(2);
	size_t len = WPART * 3 + WPART / 2;
	unsigned char *ref = malloc(len);
	const int64_t mtime = 1700000000123456789ll;
	long before = parts_sent();
	struct smux_writer *w;

	(void)state;
	assert_non_null(ref);
	w = wopen(b, "stream");
	wwrite(w, ref, 0, len, 1);
	wait_parts(before + 3);
	assert_int_equal(open_uploads(), 1);
	assert_int_equal(smux_writer_size(w), len);
	wcommit(w, 0640, mtime);
	assert_int_equal(open_uploads(), 0);
	expect_object(b, "stream", ref, len);
	expect_attrs(b, "stream", 0640, mtime);
	wdone(b, w, "stream", ref);
}

/*
 * Up to multipart_threshold a writer sends nothing while it is written
 * and its commit is one PUT (no upload, not one part: the server counts
 * none) carrying the commit's mode and mtime; written on past the
 * threshold, the same writer streams its parts. Before the threshold, a
 * writer streamed from its first full part, so this 3.5-part file sent
 * 3 parts while written and its commit a fourth, completed the upload
 * and copied the object onto itself for the metadata.
 */
static void test_writer_single_put(void **state)
{
	struct smux_backend *b = open_parts_at(2, WPART * 4);
	size_t len = WPART * 3 + WPART / 2, big = WPART * 5 + 3;
	unsigned char *ref = malloc(big);
	const int64_t mtime = 1700000000987654321ll;
	long before = parts_sent();
	struct smux_writer *w;

	(void)state;
	assert_non_null(ref);
	w = wopen(b, "single");
	wwrite(w, ref, 0, len, 3);
	assert_int_equal(open_uploads(), 0);
	wcommit(w, 0604, mtime);
	assert_int_equal(parts_sent(), before);
	assert_int_equal(open_uploads(), 0);
	expect_object(b, "single", ref, len);
	expect_attrs(b, "single", 0604, mtime);
	/* past the threshold: the full parts go while the file is open */
	wwrite(w, ref, len, big - len, 4);
	wait_parts(before + 5);
	assert_int_equal(open_uploads(), 1);
	wcommit(w, 0604, mtime);
	assert_int_equal(open_uploads(), 0);
	expect_object(b, "single", ref, big);
	wdone(b, w, "single", ref);
}

/*
 * Rewrites of parts already sent, a truncate into a sent part, a commit
 * (fsync) and then more writes and a second commit: every commit leaves
 * exactly the content written, and pread always reads it back.
 */
static void test_writer_rewrites(void **state)
{
	struct smux_backend *b = open_parts(3);
	size_t cap = WPART * 5, len = WPART * 3 + WPART / 2;
	unsigned char *ref = calloc(1, cap), *back = malloc(cap);
	struct smux_writer *w;
	struct smux_error err;
	struct smux_ctx ctx;
	long before = parts_sent();

	(void)state;
	assert_non_null(ref);
	assert_non_null(back);
	smux_ctx_init(&ctx);
	w = wopen(b, "rewrite");
	wwrite(w, ref, 0, len, 2);
	wait_parts(before + 3);
	/* into sent parts: the first bytes, across parts 2|3, mid part 2 */
	wwrite(w, ref, 10, 100, 3);
	wwrite(w, ref, WPART * 2 - 50, 300, 4);
	wwrite(w, ref, WPART + 12345, 4096, 5);
	/* cut inside part 2, then grow again past part 3 */
	assert_int_equal(smux_writer_truncate(w, &ctx, WPART + WPART / 3, &err),
			 0);
	len = WPART + WPART / 3;
	wwrite(w, ref, len + 1000, WPART * 2, 6);
	memset(ref + len, 0, 1000); /* the hole reads as zeros */
	len += 1000 + WPART * 2;
	assert_int_equal(smux_writer_pread(w, back, cap, 0, &err), (long)len);
	assert_true(memcmp(back, ref, len) == 0);
	wcommit(w, 0600, 1700000000000000000ll);
	expect_object(b, "rewrite", ref, len);
	assert_int_equal(open_uploads(), 0);
	/* fsync, then the file grows on: a second commit */
	wwrite(w, ref, len, WPART + 77, 7);
	len += WPART + 77;
	wwrite(w, ref, 5, 5, 8);
	wcommit(w, 0600, 1700000000000000001ll);
	expect_object(b, "rewrite", ref, len);
	assert_int_equal(open_uploads(), 0);
	smux_writer_close(w);
	expect_object(b, "rewrite", ref, len); /* close keeps the commit */
	assert_int_equal(smux_backend_del(b, &ctx, "rewrite", &err), 0);
	free(back);
	free(ref);
	smux_backend_unref(b);
}

/* Close without commit aborts the upload under way; nothing is stored. */
static void test_writer_close_aborts(void **state)
{
	struct smux_backend *b = open_parts(2);
	size_t len = WPART * 3 + 10;
	unsigned char *ref = malloc(len);
	struct smux_writer *w;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	long before = parts_sent();

	(void)state;
	assert_non_null(ref);
	smux_ctx_init(&ctx);
	w = wopen(b, "dropped");
	wwrite(w, ref, 0, len, 9);
	wait_parts(before + 1);
	assert_int_equal(open_uploads(), 1);
	smux_writer_close(w);
	assert_int_equal(open_uploads(), 0);
	expect_code(smux_backend_head(b, &ctx, "dropped", &info, &err), &err,
		    SMUX_E_KEY_NOT_FOUND);
	free(ref);
	smux_backend_unref(b);
}

/* fallocate(2) on a streaming writer: a punched hole in a sent part and
 * a zeroed range past the end are in what the commit stores (the parts
 * they touch go again); a mode the writer lacks is NOT_SUPPORTED. */
static void test_writer_fallocate(void **state)
{
	struct smux_backend *b = open_parts(2);
	size_t cap = WPART * 4, len = WPART * 2 + WPART / 2;
	unsigned char *ref = calloc(1, cap);
	struct smux_writer *w;
	struct smux_error err;
	struct smux_ctx ctx;
	long before = parts_sent();

	(void)state;
	assert_non_null(ref);
	smux_ctx_init(&ctx);
	w = wopen(b, "falloc");
	wwrite(w, ref, 0, len, 9);
	wait_parts(before + 2);
	/* a hole in part 1 (sent), size kept */
	assert_int_equal(smux_writer_fallocate(w, &ctx,
					       SMUX_FALLOC_PUNCH_HOLE |
						       SMUX_FALLOC_KEEP_SIZE,
					       4096, 3 * 4096ULL, &err),
			 0);
	memset(ref + 4096, 0, (size_t)3 * 4096);
	/* zeros from inside the last part to past the end: it grows */
	assert_int_equal(smux_writer_fallocate(w, &ctx, SMUX_FALLOC_ZERO_RANGE,
					       len - 100, WPART, &err),
			 0);
	memset(ref + len - 100, 0, WPART);
	len += WPART - 100;
	assert_int_equal(smux_writer_size(w), len);
	/* allocated past the end, size kept: nothing to read */
	assert_int_equal(smux_writer_fallocate(w, &ctx, SMUX_FALLOC_KEEP_SIZE,
					       len, 4096, &err),
			 0);
	assert_int_equal(smux_writer_size(w), len);
	wcommit(w, 0644, 1700000000000000000ll);
	expect_object(b, "falloc", ref, len);
	assert_int_equal(open_uploads(), 0);
	wdone(b, w, "falloc", ref);
}

/*
 * A background part that fails does not fail the writes (the content is
 * whole in the staging file): they go on; the commit tries the part once
 * more, and when that fails too it fails and leaves no upload.
 */
static void test_writer_failure_aborts(void **state)
{
	struct smux_backend *b = open_parts(2);
	size_t len = WPART + WPART / 2;
	unsigned char *ref = calloc(1, WPART * 3);
	struct smux_writer *w;
	struct smux_error err;
	struct smux_ctx ctx;
	long sent;

	(void)state;
	assert_non_null(ref);
	smux_ctx_init(&ctx);
	w = wopen(b, "fail-bg");
	wwrite(w, ref, 0, len, 10);
	wait_parts(1); /* part 1 was sent and refused */
	sent = parts_sent();
	/* writes for a while after it: the worker has recorded the
	 * failure long before the last of them */
	for (int i = 0; i < 100; i++) {
		if (smux_writer_pwrite(w, &ctx, "x", 1, len++, &err))
			fail_msg("a write after a failed background part: %s",
				 err.e.message);
		usleep(10000);
	}
	assert_int_equal(smux_writer_size(w), len);
	wcommit_fails(w);
	assert_true(parts_sent() > sent); /* the commit tried again */
	assert_int_equal(open_uploads(), 0);
	smux_writer_close(w);
	assert_int_equal(open_uploads(), 0);
	free(ref);
	smux_backend_unref(b);
}

/* A part that failed in the background is sent once more at commit. */
static void test_writer_retry_at_commit(void **state)
{
	struct smux_backend *b = open_parts(2);
	size_t len = WPART * 2 + WPART / 2;
	unsigned char *ref = malloc(len);
	struct smux_writer *w;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	assert_non_null(ref);
	smux_ctx_init(&ctx);
	w = wopen(b, "flaky");
	memset(ref, 'f', len);
	/* one write: no later pwrite sees the failure first */
	if (smux_writer_pwrite(w, &ctx, ref, len, 0, &err))
		fail_msg("pwrite: %s", err.e.message);
	wcommit(w, 0644, 1700000000000000000ll);
	expect_object(b, "flaky", ref, len);
	assert_int_equal(open_uploads(), 0);
	wdone(b, w, "flaky", ref);
}

/* The server lost the upload's parts at the complete (InvalidPart: a late
 * send of a part replaced the one listed; NoSuchUpload: a lifecycle rule
 * aborted it): the content is whole in the staging file, so the commit
 * puts it whole instead of failing the close. */
static void test_writer_upload_lost(void **state)
{
	static const char *const keys[] = {"lost", "expired"};
	struct smux_backend *b = open_parts(2);
	size_t len = WPART * 2 + WPART / 2;
	unsigned char *ref = malloc(len);
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	assert_non_null(ref);
	smux_ctx_init(&ctx);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		long before = parts_sent();
		struct smux_writer *w = wopen(b, keys[k]);

		wwrite(w, ref, 0, len, 20 + (unsigned)k);
		wait_parts(before + 2); /* it streams: an upload runs */
		wcommit(w, 0640, 1700000000000000000ll);
		expect_object(b, keys[k], ref, len);
		expect_attrs(b, keys[k], 0640, 1700000000000000000ll);
		assert_int_equal(open_uploads(), 0);
		smux_writer_close(w);
		assert_int_equal(smux_backend_del(b, &ctx, keys[k], &err), 0);
	}
	free(ref);
	smux_backend_unref(b);
}

/* Only truncating opens stream: the others stage, as before. */
static void test_writer_only_trunc(void **state)
{
	struct smux_backend *b = open_parts(1);
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	expect_code(smux_backend_writer_open(b, &ctx, "k", 0, &w, &err), &err,
		    SMUX_E_NOT_SUPPORTED);
	expect_code(smux_backend_writer_open(
			    b, &ctx, "k",
			    SMUX_WRITER_TRUNC | SMUX_WRITER_INPLACE, &w, &err),
		    &err, SMUX_E_NOT_SUPPORTED);
	assert_null(w);
	smux_backend_unref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_listings),
		cmocka_unit_test(test_truncated_body),
		cmocka_unit_test(test_hostile_ranges),
		cmocka_unit_test(test_put_md5),
		cmocka_unit_test(test_error_documents),
		cmocka_unit_test(test_pin_checked),
		cmocka_unit_test(test_multipart_aborted),
		cmocka_unit_test(test_orphans_aborted),
		cmocka_unit_test(test_orphans_live_kept),
		cmocka_unit_test(test_prefix_folder_object),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_keeps_owners),
		cmocka_unit_test(test_delete_many_request),
		cmocka_unit_test(test_delete_many_answers),
		cmocka_unit_test(test_delete_many_fallback),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_writer_streams),
		cmocka_unit_test(test_writer_single_put),
		cmocka_unit_test(test_writer_rewrites),
		cmocka_unit_test(test_writer_close_aborts),
		cmocka_unit_test(test_writer_fallocate),
		cmocka_unit_test(test_writer_failure_aborts),
		cmocka_unit_test(test_writer_retry_at_commit),
		cmocka_unit_test(test_writer_upload_lost),
		cmocka_unit_test(test_writer_only_trunc),
	};

	return cmocka_run_group_tests(tests, start, stop);
}
