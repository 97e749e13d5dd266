/* SPDX-License-Identifier: MIT */
/*
 * test_s3_live.c - the S3 foundations against real servers on loopback:
 * requests signed by backends/s3_sign.h, sent with plain libcurl (the HTTP
 * layer is not used here), their bodies parsed by backends/s3_xml.h.
 *
 * Group "swift" runs against OpenStack Swift's s3api (tests/servers/
 * swift.sh), which checks SigV4 and payload hashes strictly: bucket
 * creation, a PUT/GET (path-style, presigned and virtual-host)/list/delete
 * of an awkward key (space, + % * ~ ( ), unicode) with encoding-type=url, a multipart upload, DeleteObjects, a
 * presigned GET, and the refusals: a wrong secret (SignatureDoesNotMatch ->
 * PERMISSION_DENIED), a wrong payload hash, a missing key (NoSuchKey ->
 * KEY_NOT_FOUND). Group "s3rver" runs the same requests against s3rver
 * (tests/servers/s3rver.sh), which does not verify signatures, to check
 * its response bodies parse.
 *
 * Each group starts its server in a temp dir and stops it in teardown; a
 * guardian child stops it too if this process dies (PR_SET_PDEATHSIG).
 * Under `make check` the servers run once for every pass
 * (tests/servers/shared.sh, SMUX_TEST_SERVERS) and are used as they are.
 * Missing server binaries (scripts/install-deps.sh installs them) fail
 * the test: they are not a reason to skip.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include "backends/s3_sign.h"
#include "backends/s3_xml.h"

#define BUCKET	 "smux-live"
#define AWKWARD	 "dir/a b+c%d*e~f (1) \xc3\xa9t\xc3\xa9.txt"
#define BODY_MAX (1 << 20)

struct server {
	const char *script; /* tests/servers/NAME.sh */
	bool strict;	    /* verifies signatures and payload hashes */
	char dir[256];
	pid_t guardian;
	char endpoint[128]; /* http://127.0.0.1:PORT */
	char host[64];	    /* 127.0.0.1:PORT */
	char access[64], secret[64];
	char vhost_domain[64]; /* S3_VHOST_DOMAIN, "" when none */
	struct smux_s3_signer signer;
};

struct resp {
	long status;
	char *body;
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t len = size * n;
	if (r->len + len > BODY_MAX)
		return 0; /* bounded: fail the transfer */
	char *b = realloc(r->body, r->len + len + 1);
	if (!b)
		return 0;
	memcpy(b + r->len, p, len);
	r->body = b;
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

static void resp_free(struct resp *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* When set, s3_call addresses this virtual host ("bucket.domain:port",
 * resolved to 127.0.0.1) instead of the endpoint's host. */
static const char *vhost;

/* Signs and sends one request; @body may be NULL. With @presign, the
 * request goes out as a presigned URL (no Authorization header). */
static void s3_call_once(struct server *s, struct smux_s3_signer *signer,
			 const char *method, const char *path,
			 const struct smux_s3_kv *q, size_t nq,
			 const struct smux_s3_kv *h, size_t nh,
			 const char *body, size_t body_len,
			 const char *payload_hash, bool presign,
			 struct resp *out)
{
	char hash[SMUX_S3_HEX256];
	if (!payload_hash) {
		smux__s3_sha256_hex(body ? body : "", body_len, hash);
		payload_hash = hash;
	}
	struct smux_s3_request req = {
		.method = method,
		.host = vhost ? vhost : s->host,
		.path = path,
		.query = q,
		.nquery = nq,
		.headers = h,
		.nheaders = nh,
		.payload_hash = presign ? NULL : payload_hash,
		.now = time(NULL),
		.region = "us-east-1",
	};
	struct smux_s3_signed sig;
	struct smux_error err = {0};
	int rc = presign ? smux__s3_presign(signer, &req, 300, &sig, &err)
			 : smux__s3_sign(signer, &req, &sig, &err);
	if (rc)
		fail_msg("sign: %s", err.e.message);

	char url[4096], line[8192];
	snprintf(url, sizeof(url), "http://%s%s%s%s", req.host, sig.url_path,
		 *sig.url_query ? "?" : "", sig.url_query);
	struct curl_slist *resolve = NULL;
	if (vhost) {
		snprintf(line, sizeof(line), "%s:127.0.0.1", vhost);
		resolve = curl_slist_append(NULL, line);
	}
	struct curl_slist *hl = NULL;
	for (size_t i = 0; i < nh; i++) {
		snprintf(line, sizeof(line), "%s: %s", h[i].name, h[i].value);
		hl = curl_slist_append(hl, line);
	}
	if (!presign) {
		snprintf(line, sizeof(line), "Authorization: %s",
			 sig.authorization);
		hl = curl_slist_append(hl, line);
		snprintf(line, sizeof(line), "X-Amz-Date: %s", sig.amz_date);
		hl = curl_slist_append(hl, line);
		snprintf(line, sizeof(line), "X-Amz-Content-Sha256: %s",
			 sig.payload_hash);
		hl = curl_slist_append(hl, line);
	}
	hl = curl_slist_append(hl, "Expect:");
	bool has_ctype = false;
	for (size_t i = 0; i < nh; i++)
		has_ctype |= !strcasecmp(h[i].name, "Content-Type");
	if (!has_ctype)
		hl = curl_slist_append(hl, "Content-Type:");

	CURL *c = curl_easy_init();
	assert_non_null(c);
	memset(out, 0, sizeof(*out));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		if (body || !strcmp(method, "PUT") || !strcmp(method, "POST")) {
			curl_easy_setopt(c, CURLOPT_POSTFIELDS,
					 body ? body : "");
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
					 (long)body_len);
		}
	}
	CURLcode cc = curl_easy_perform(c);
	if (cc != CURLE_OK)
		fail_msg("%s %s: %s", method, url, curl_easy_strerror(cc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	curl_slist_free_all(resolve);
	smux__s3_signed_release(&sig);
	if (!out->body) {
		out->body = strdup("");
		assert_non_null(out->body);
	}
}

/*
 * One S3 call, signed anew and sent again after a 503 (S3's SlowDown;
 * Swift's s3api answers "Please reduce your request rate" while its
 * servers are busy: a CI run's three lanes on two cores met it at the
 * first request), as every S3 client does, at most 5 times in ~15 s.
 */
static void s3_call(struct server *s, struct smux_s3_signer *signer,
		    const char *method, const char *path,
		    const struct smux_s3_kv *q, size_t nq,
		    const struct smux_s3_kv *h, size_t nh, const char *body,
		    size_t body_len, const char *payload_hash, bool presign,
		    struct resp *out)
{
	for (unsigned attempt = 1;; attempt++) {
		s3_call_once(s, signer, method, path, q, nq, h, nh, body,
			     body_len, payload_hash, presign, out);
		if (out->status != 503 || attempt == 5)
			return;
		free(out->body);
		out->body = NULL;
		sleep(attempt);
	}
}

static void expect_status(const struct resp *r, long want, const char *what)
{
	if (r->status != want)
		fail_msg("%s: HTTP %ld (want %ld): %.500s", what, r->status,
			 want, r->body);
}

static struct smux_s3_xml *parse(enum smux_s3_doc kind, const struct resp *r)
{
	struct smux_s3_xml *x;
	struct smux_error err = {0};
	if (smux__s3_xml_parse(kind, r->body, r->len, &x, &err))
		fail_msg("parse: %s: %.500s", err.e.message, r->body);
	return x;
}

static int read_env(struct server *s)
{
	char path[300], line[256];
	snprintf(path, sizeof(path), "%s/env", s->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *v = strchr(line, '=');
		if (!v)
			continue;
		*v++ = '\0';
		if (!strcmp(line, "S3_ENDPOINT"))
			snprintf(s->endpoint, sizeof(s->endpoint), "%s", v);
		else if (!strcmp(line, "S3_ACCESS_KEY"))
			snprintf(s->access, sizeof(s->access), "%s", v);
		else if (!strcmp(line, "S3_SECRET_KEY"))
			snprintf(s->secret, sizeof(s->secret), "%s", v);
		else if (!strcmp(line, "S3_VHOST_DOMAIN"))
			snprintf(s->vhost_domain, sizeof(s->vhost_domain), "%s",
				 v);
	}
	fclose(f);
	const char *h = strstr(s->endpoint, "://");
	if (!h)
		return -1;
	snprintf(s->host, sizeof(s->host), "%s", h + 3);
	return 0;
}

static int start_server(const struct server *s)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "tests/servers/%s start '%s' >/dev/null",
		 s->script, s->dir);
	if (system(cmd) != 0) {
		print_error("%s start failed (its log is above)\n", s->script);
		return -1;
	}
	return 0;
}

/*
 * A server `make check` started once for every test binary and both passes
 * (SMUX_TEST_SERVERS, tests/servers/shared.sh): 1 and its env read when
 * this one runs there, 0 when the test starts its own.
 */
static int shared_server(struct server *s)
{
	const char *root = getenv("SMUX_TEST_SERVERS");
	char name[64];

	if (!root || !*root)
		return 0;
	snprintf(name, sizeof(name), "%s", s->script);
	name[strcspn(name, ".")] = '\0'; /* swift.sh -> swift */
	snprintf(s->dir, sizeof(s->dir), "%s/%s", root, name);
	if (read_env(s) != 0) {
		print_error("SMUX_TEST_SERVERS=%s: no %s/env\n", root, name);
		return -1;
	}
	s->guardian = 0;
	return 1;
}

static int server_setup(void **state, struct server *s)
{
	const char *tmp = getenv("TMPDIR");
	int shared = shared_server(s);

	if (shared < 0)
		return -1;
	if (shared)
		goto signer;
	snprintf(s->dir, sizeof(s->dir), "%s/smux-s3live-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(s->dir))
		return -1;
	pid_t parent = getpid();
	s->guardian = fork();
	if (s->guardian == 0) {
		/* stops the server if the test process dies */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, NULL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == parent) {
			int sig;
			sigwait(&set, &sig);
		}
		char cmd[1024];
		snprintf(cmd, sizeof(cmd),
			 "tests/servers/%s stop '%s' >/dev/null 2>&1; "
			 "rm -rf '%s'",
			 s->script, s->dir, s->dir);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (start_server(s) != 0 || read_env(s) != 0)
		return -1;
signer:;
	struct smux_s3_creds c = {.access_key = s->access,
				  .secret_key = s->secret};
	if (smux__s3_signer_init(&s->signer, &c, NULL))
		return -1;
	*state = s;
	return 0;
}

static int server_teardown(void **state)
{
	struct server *s = *state;
	smux__s3_signer_release(&s->signer);
	/* the guardian stops the server and removes the dir */
	if (s->guardian > 0) {
		kill(s->guardian, SIGTERM);
		waitpid(s->guardian, NULL, 0);
	}
	return 0;
}

static struct server swift = {.script = "swift.sh", .strict = true};
static struct server s3rver = {.script = "s3rver.sh", .strict = false};

static int swift_setup(void **state)
{
	return server_setup(state, &swift);
}

static int s3rver_setup(void **state)
{
	return server_setup(state, &s3rver);
}

static void test_object_roundtrip(void **state)
{
	struct server *s = *state;
	struct resp r;
	s3_call(s, &s->signer, "PUT", "/" BUCKET, NULL, 0, NULL, 0, NULL, 0,
		NULL, false, &r);
	if (r.status != 200 && r.status != 409) /* 409: already there */
		expect_status(&r, 200, "create bucket");
	resp_free(&r);

	const char *data = "hello, strict S3\n";
	struct smux_s3_kv meta[] = {{"x-amz-meta-mtime", "1764590400.5"},
				    {"Content-Type", "text/plain"}};
	s3_call(s, &s->signer, "PUT", "/" BUCKET "/" AWKWARD, NULL, 0, meta, 2,
		data, strlen(data), NULL, false, &r);
	expect_status(&r, 200, "put awkward key");
	resp_free(&r);

	s3_call(s, &s->signer, "GET", "/" BUCKET "/" AWKWARD, NULL, 0, NULL, 0,
		NULL, 0, NULL, false, &r);
	expect_status(&r, 200, "get awkward key");
	assert_string_equal(r.body, data);
	resp_free(&r);

	/* a presigned GET */
	s3_call(s, &s->signer, "GET", "/" BUCKET "/" AWKWARD, NULL, 0, NULL, 0,
		NULL, 0, NULL, true, &r);
	expect_status(&r, 200, "presigned get");
	assert_string_equal(r.body, data);
	resp_free(&r);

	/* the same object by virtual-host addressing (Swift only) */
	if (s->vhost_domain[0]) {
		char vh[160];
		const char *port = strrchr(s->host, ':');
		snprintf(vh, sizeof(vh), BUCKET ".%s%s", s->vhost_domain,
			 port ? port : "");
		vhost = vh;
		s3_call(s, &s->signer, "GET", "/" AWKWARD, NULL, 0, NULL, 0,
			NULL, 0, NULL, false, &r);
		vhost = NULL;
		expect_status(&r, 200, "virtual-host get");
		assert_string_equal(r.body, data);
		resp_free(&r);
	}

	/* ListObjectsV2 with a delimiter and encoding-type=url */
	struct smux_s3_kv q[] = {{"list-type", "2"},
				 {"prefix", "dir/"},
				 {"delimiter", "/"},
				 {"encoding-type", "url"}};
	s3_call(s, &s->signer, "GET", "/" BUCKET, q, 4, NULL, 0, NULL, 0, NULL,
		false, &r);
	expect_status(&r, 200, "list");
	struct smux_s3_xml *x = parse(SMUX_S3_DOC_LIST, &r);
	const struct smux_s3_result *res = smux__s3_xml_result(x);
	assert_int_equal(res->nobjs, 1);
	assert_string_equal(res->objs[0].key, AWKWARD);
	assert_int_equal(res->objs[0].size, strlen(data));
	assert_non_null(res->objs[0].etag);
	assert_true(res->objs[0].mtime_ns > 0);
	assert_false(res->truncated);
	smux__s3_xml_free(x);
	resp_free(&r);

	s3_call(s, &s->signer, "DELETE", "/" BUCKET "/" AWKWARD, NULL, 0, NULL,
		0, NULL, 0, NULL, false, &r);
	expect_status(&r, 204, "delete");
	resp_free(&r);

	/* a missing key: NoSuchKey -> KEY_NOT_FOUND. s3rver writes the key
	 * into its error body with HTML entities ("&eacute;"), which XML
	 * does not define: such a body is BAD_RESPONSE and the mapping falls
	 * back on the status alone. */
	s3_call(s, &s->signer, "GET", "/" BUCKET "/" AWKWARD, NULL, 0, NULL, 0,
		NULL, 0, NULL, false, &r);
	expect_status(&r, 404, "get deleted");
	struct smux_s3_xml *ex = NULL;
	struct smux_error err = {0};
	int prc =
		smux__s3_xml_parse(SMUX_S3_DOC_ERROR, r.body, r.len, &ex, &err);
	if (s->strict) {
		assert_int_equal(prc, 0);
		assert_string_equal(smux__s3_xml_result(ex)->code, "NoSuchKey");
	} else {
		assert_int_equal(prc, -EIO);
		assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	}
	smux__s3_error_fill(&err, (int)r.status,
			    ex ? smux__s3_xml_result(ex) : NULL, "s3", "get");
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	smux__s3_xml_free(ex);
	resp_free(&r);
}

static void test_multipart_and_batch_delete(void **state)
{
	struct server *s = *state;
	struct resp r;
	const char *key = "multi part/obj+1.bin";
	struct smux_s3_kv init_q[] = {{"uploads", NULL}};
	s3_call(s, &s->signer, "POST", "/" BUCKET "/multi part/obj+1.bin",
		init_q, 1, NULL, 0, NULL, 0, NULL, false, &r);
	expect_status(&r, 200, "initiate");
	struct smux_s3_xml *x = parse(SMUX_S3_DOC_INITIATE, &r);
	char upload[512];
	snprintf(upload, sizeof(upload), "%s",
		 smux__s3_xml_result(x)->upload_id);
	smux__s3_xml_free(x);
	resp_free(&r);

	/* one (last, so small) part, streamed-style: UNSIGNED-PAYLOAD */
	const char *part = "part one of one";
	struct smux_s3_kv part_q[] = {{"partNumber", "1"},
				      {"uploadId", upload}};
	s3_call(s, &s->signer, "PUT", "/" BUCKET "/multi part/obj+1.bin",
		part_q, 2, NULL, 0, part, strlen(part),
		SMUX_S3_UNSIGNED_PAYLOAD, false, &r);
	expect_status(&r, 200, "upload part");
	resp_free(&r);

	/* the part's ETag is the MD5 of its bytes */
	unsigned char md5[16];
	unsigned int mdlen = 0;
	EVP_Digest(part, strlen(part), md5, &mdlen, EVP_md5(), NULL);
	char etag[40];
	for (int i = 0; i < 16; i++)
		snprintf(etag + (size_t)2 * i, 3, "%02x", md5[i]);
	char body[512];
	snprintf(body, sizeof(body),
		 "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
		 "<ETag>\"%s\"</ETag></Part></CompleteMultipartUpload>",
		 etag);
	struct smux_s3_kv done_q[] = {{"uploadId", upload}};
	s3_call(s, &s->signer, "POST", "/" BUCKET "/multi part/obj+1.bin",
		done_q, 1, NULL, 0, body, strlen(body), NULL, false, &r);
	expect_status(&r, 200, "complete");
	x = parse(SMUX_S3_DOC_COMPLETE, &r);
	assert_false(smux__s3_xml_result(x)->is_error);
	assert_non_null(smux__s3_xml_result(x)->etag);
	if (s->strict) /* Swift: "<md5 of md5s>-1"; s3rver: whole MD5 */
		assert_non_null(strstr(smux__s3_xml_result(x)->etag, "-1"));
	smux__s3_xml_free(x);
	resp_free(&r);

	s3_call(s, &s->signer, "GET", "/" BUCKET "/multi part/obj+1.bin", NULL,
		0, NULL, 0, NULL, 0, NULL, false, &r);
	expect_status(&r, 200, "get multipart object");
	assert_string_equal(r.body, part);
	resp_free(&r);

	/* DeleteObjects (Content-MD5 required) of it and a missing key */
	snprintf(body, sizeof(body),
		 "<Delete><Object><Key>%s</Key></Object>"
		 "<Object><Key>never there</Key></Object></Delete>",
		 key);
	EVP_Digest(body, strlen(body), md5, &mdlen, EVP_md5(), NULL);
	char b64[32];
	EVP_EncodeBlock((unsigned char *)b64, md5, 16);
	struct smux_s3_kv del_q[] = {{"delete", NULL}};
	struct smux_s3_kv del_h[] = {{"Content-MD5", b64}};
	s3_call(s, &s->signer, "POST", "/" BUCKET, del_q, 1, del_h, 1, body,
		strlen(body), NULL, false, &r);
	expect_status(&r, 200, "delete objects");
	x = parse(SMUX_S3_DOC_DELETE, &r);
	assert_int_equal(smux__s3_xml_result(x)->ndelete_errors, 0);
	assert_true(smux__s3_xml_result(x)->ndeleted >= 1);
	smux__s3_xml_free(x);
	resp_free(&r);
}

/* Only a strict server refuses these: a wrong secret and a body that does
 * not match its signed hash. */
static void test_strict_refusals(void **state)
{
	struct server *s = *state;
	struct resp r;
	if (!s->strict)
		return;
	struct smux_s3_signer wrong;
	struct smux_s3_creds c = {.access_key = s->access,
				  .secret_key = "not-the-secret"};
	assert_int_equal(smux__s3_signer_init(&wrong, &c, NULL), 0);
	s3_call(s, &wrong, "GET", "/" BUCKET, NULL, 0, NULL, 0, NULL, 0, NULL,
		false, &r);
	expect_status(&r, 403, "wrong secret");
	struct smux_s3_xml *x = parse(SMUX_S3_DOC_ERROR, &r);
	assert_string_equal(smux__s3_xml_result(x)->code,
			    "SignatureDoesNotMatch");
	struct smux_error err = {0};
	smux__s3_error_fill(&err, 403, smux__s3_xml_result(x), "s3", "list");
	assert_int_equal(err.e.code, SMUX_E_PERMISSION_DENIED);
	assert_null(strstr(err.e.message, "not-the-secret"));
	assert_null(strstr(err.e.message, s->secret));
	smux__s3_xml_free(x);
	resp_free(&r);
	smux__s3_signer_release(&wrong);

	char other[SMUX_S3_HEX256];
	smux__s3_sha256_hex("other bytes", 11, other);
	s3_call(s, &s->signer, "PUT", "/" BUCKET "/k", NULL, 0, NULL, 0,
		"these bytes", 11, other, false, &r);
	expect_status(&r, 400, "wrong payload hash");
	x = parse(SMUX_S3_DOC_ERROR, &r);
	/* Swift 2.30 says BadDigest, AWS XAmzContentSHA256Mismatch */
	const char *code = smux__s3_xml_result(x)->code;
	assert_true(!strcmp(code, "BadDigest") ||
		    !strcmp(code, "XAmzContentSHA256Mismatch"));
	smux__s3_xml_free(x);
	resp_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_object_roundtrip),
		cmocka_unit_test(test_multipart_and_batch_delete),
		cmocka_unit_test(test_strict_refusals),
	};
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = cmocka_run_group_tests_name("swift", tests, swift_setup,
					     server_teardown);
	rc |= cmocka_run_group_tests_name("s3rver", tests, s3rver_setup,
					  server_teardown);
	curl_global_cleanup();
	return rc;
}
