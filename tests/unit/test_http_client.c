// SPDX-License-Identifier: MIT
/*
 * test_http_client.c - the HTTP layer (src/backends/http_client.c) against
 * a scripted python3 server on loopback (tests/servers/http_script.py):
 * streaming both ways, connection reuse, retries with Retry-After, the
 * deadline, the idle timeout, cancellation, and what hostile answers
 * (truncated, garbage, oversized) map to.
 *
 * No timed assertions: a test waits for states (bounded) and checks
 * outcomes and counts, never durations.
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
#include <unistd.h>

#include "backends/http_client.h"
#include "support/test_server.h"

#define MS 1000000LL

static struct ts_server server, tls_server;
static char server_dir[64];
static char base[64];

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
	int rc;

	(void)state;
	snprintf(server_dir, sizeof(server_dir), "/tmp/smux-httpc-XXXXXX");
	if (!mkdtemp(server_dir))
		return -1;
	rc = ts_script_server_start(&server, server_dir);
	if (rc == -ENOENT) {
		fprintf(stderr,
			"\n*** SKIPPING test_http_client: python3 or "
			"tests/servers/http_script.py not found ***\n\n");
		return 0;
	}
	if (rc < 0)
		return -1;
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", server.port);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	ts_server_stop(&server);
	ts_server_stop(&tls_server);
	nftw(server_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* A client with short timeouts so failures come quickly. */
static struct smux__http *client(unsigned attempts, int64_t idle_ms,
				 const char *user, const char *pass)
{
	struct smux__http_opts o = {.backend = "web",
				    .max_attempts = attempts,
				    .idle_timeout_ms = idle_ms,
				    .backoff_base_ms = 10,
				    .backoff_cap_ms = 2000,
				    .username = user,
				    .password = pass};
	struct smux__http *h;
	struct smux_error err;

	if (!server.pid)
		skip();
	assert_int_equal(smux__http_new(&o, &h, &err), 0);
	return h;
}

struct call {
	char url[256];
	struct smux__http_req req;
	struct smux__http_resp resp;
	struct smux_sink sink;
	struct smux_error err;
	int rc;
};

static int do_get(struct smux__http *h, const struct smux_ctx *ctx,
		  struct call *c, const char *method, const char *path)
{
	snprintf(c->url, sizeof(c->url), "%s%s", base, path);
	c->req.method = method;
	c->req.url = c->url;
	c->req.what = path;
	smux_sink_dyn(&c->sink);
	c->req.sink = &c->sink;
	memset(&c->err, 0, sizeof(c->err));
	c->rc = smux__http_do(h, ctx, &c->req, &c->resp, &c->err);
	return c->rc;
}

/* The body of /hits/ID or /conns as a number. */
static long server_number(struct smux__http *h, const char *path)
{
	struct smux_ctx ctx;
	struct call c = {0};
	long n;

	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", path), 0);
	n = strtol((const char *)c.sink.u.dyn.buf, NULL, 10);
	smux_sink_release(&c.sink);
	return n;
}

static void test_get_streams_body(void **state)
{
	struct smux__http *h = client(1, 0, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/ok/300000"), 0);
	assert_int_equal(c.resp.status, 200);
	assert_int_equal(c.sink.written, 300000);
	assert_int_equal(c.resp.body_bytes, 300000);
	assert_int_equal(c.resp.content_length, 300000);
	assert_string_equal(c.resp.etag, "\"v1\"");
	for (size_t i = 0; i < 300000; i++)
		if (c.sink.u.dyn.buf[i] != (unsigned char)((i * 7 + 3) & 0xFF))
			fail_msg("byte %zu differs", i);
	smux_sink_release(&c.sink);
	/* HEAD: headers, no body */
	memset(&c, 0, sizeof(c));
	assert_int_equal(do_get(h, &ctx, &c, "HEAD", "/ok/1234"), 0);
	assert_int_equal(c.resp.content_length, 1234);
	assert_int_equal(c.sink.written, 0);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_connection_reused(void **state)
{
	struct smux__http *h = client(1, 0, NULL, NULL);
	struct smux_ctx ctx;
	long before, after;

	(void)state;
	smux_ctx_init(&ctx);
	before = server_number(h, "/conns");
	for (int i = 0; i < 10; i++) {
		struct call c = {0};

		assert_int_equal(do_get(h, &ctx, &c, "GET", "/ok/10"), 0);
		smux_sink_release(&c.sink);
	}
	after = server_number(h, "/conns");
	/* eleven requests after the first, all on its connection */
	assert_int_equal(after, before);
	smux__http_free(h);
}

static void test_retry_after_503(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/retry-after/r503"), 0);
	assert_int_equal(c.resp.status, 200);
	assert_int_equal(c.resp.attempts, 2);
	assert_string_equal((const char *)c.sink.u.dyn.buf, "ok");
	smux_sink_release(&c.sink);
	assert_int_equal(server_number(h, "/hits/r503"), 2);
	smux__http_free(h);
}

static void test_retry_after_past_deadline(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_ctx ctx, root;
	struct call c = {0};

	(void)state;
	/* Retry-After: 30 s (capped at the client's 2 s) does not fit in a
	 * 1.5 s budget: the 503 is reported at once, no second attempt */
	smux_ctx_init(&root);
	smux_ctx_derive(&ctx, &root, 1500 * MS, NULL);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/retry-after-long/rdl"),
			 -EAGAIN);
	assert_int_equal(c.err.e.code, SMUX_E_HTTP);
	assert_int_equal(c.err.e.http_status, 503);
	assert_int_equal(c.resp.attempts, 1);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_429(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/once/429/t429"), 0);
	assert_int_equal(c.resp.attempts, 2);
	smux_sink_release(&c.sink);
	/* a 429 that never ends: transient HTTP_ERROR after the attempts */
	memset(&c, 0, sizeof(c));
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/always/429"), -EAGAIN);
	assert_int_equal(c.err.e.code, SMUX_E_HTTP);
	assert_int_equal(c.err.e.http_status, 429);
	assert_int_equal(smux_error_class(&c.err.e), SMUX_CLASS_TRANSIENT);
	assert_int_equal(c.err.e.attempts, 3);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_statuses(void **state)
{
	static const struct {
		const char *path;
		enum smux_code code;
		enum smux_class cls;
		unsigned attempts;
	} cases[] = {
		{"/always/404", SMUX_E_KEY_NOT_FOUND, SMUX_CLASS_SEMANTIC, 1},
		{"/always/403", SMUX_E_PERMISSION_DENIED, SMUX_CLASS_SEMANTIC,
		 1},
		{"/always/412", SMUX_E_PRECONDITION_FAILED, SMUX_CLASS_SEMANTIC,
		 1},
		{"/always/418", SMUX_E_HTTP, SMUX_CLASS_SEMANTIC, 1},
		{"/always/301", SMUX_E_HTTP, SMUX_CLASS_TRANSIENT, 1},
		{"/always/500", SMUX_E_HTTP, SMUX_CLASS_TRANSIENT, 2},
		{"/always/501", SMUX_E_HTTP, SMUX_CLASS_TRANSIENT, 1},
		{"/always/408", SMUX_E_HTTP, SMUX_CLASS_TRANSIENT, 2},
		{"/always/507", SMUX_E_NO_SPACE, SMUX_CLASS_TRANSIENT, 1},
	};
	struct smux__http *h = client(2, 0, NULL, NULL);
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct call c = {0};

		assert_true(do_get(h, &ctx, &c, "GET", cases[i].path) < 0);
		if (c.err.e.code != cases[i].code ||
		    smux_error_class(&c.err.e) != cases[i].cls ||
		    c.err.e.attempts != cases[i].attempts)
			fail_msg("%s: code %s class %s attempts %u",
				 cases[i].path, smux_code_name(c.err.e.code),
				 smux_class_name(smux_error_class(&c.err.e)),
				 c.err.e.attempts);
		/* an error body is kept for the backend, not sunk */
		assert_int_equal(c.sink.written, 0);
		assert_string_equal(c.resp.errbody, "status body");
		smux_sink_release(&c.sink);
	}
	smux__http_free(h);
}

static void test_hang_fails_at_deadline(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_ctx ctx, root;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&root);
	smux_ctx_derive(&ctx, &root, 700 * MS, NULL);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/hang"), -ETIMEDOUT);
	assert_int_equal(c.err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_true(smux_now_ns() >= ctx.deadline_ns);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_idle_timeout(void **state)
{
	struct smux__http *h = client(2, 300, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	/* no deadline: the idle timeout ends each stalled attempt */
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/hang"), -ETIMEDOUT);
	assert_int_equal(c.err.e.code, SMUX_E_CONNECTION);
	assert_int_equal(smux_error_class(&c.err.e), SMUX_CLASS_TRANSIENT);
	assert_int_equal(c.err.e.attempts, 2);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_slow_steady_body(void **state)
{
	/* 25 KiB, one KiB every 100 ms: 2.5 s in all, past the 1 s idle
	 * timeout, and it finishes */
	struct smux__http *h = client(1, 1000, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/slow/25/100"), 0);
	assert_int_equal(c.sink.written, 25 * 1024);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_truncated_body(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	long before = 0;
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	before = server_number(h, "/hits/truncated");
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/truncated"), -EIO);
	assert_int_equal(c.err.e.code, SMUX_E_BAD_RESPONSE);
	assert_int_equal(smux_error_class(&c.err.e), SMUX_CLASS_TRANSIENT);
	/* retried (the sink rewound each time), and nothing half left */
	assert_int_equal(c.err.e.attempts, 3);
	assert_int_equal(server_number(h, "/hits/truncated") - before, 3);
	assert_int_equal(c.sink.written, 10);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_garbage(void **state)
{
	struct smux__http *h = client(2, 0, NULL, NULL);
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	for (int i = 0; i < 3; i++) {
		static const char *const paths[] = {"/garbage", "/badlen",
						    "/bigerror"};
		struct call c = {0};

		assert_true(do_get(h, &ctx, &c, "GET", paths[i]) < 0);
		if (i < 2) {
			assert_int_equal(c.err.e.code, SMUX_E_BAD_RESPONSE);
		} else {
			/* a huge error body is cut at the bound */
			assert_int_equal(c.err.e.code, SMUX_E_HTTP);
			assert_int_equal(c.resp.errbody_len,
					 SMUX__HTTP_ERRBODY_MAX);
		}
		smux_sink_release(&c.sink);
	}
	smux__http_free(h);
}

static void test_max_body(void **state)
{
	struct smux__http *h = client(1, 0, NULL, NULL);
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	c.req.max_body = 1000;
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/ok/5000"), -EIO);
	assert_int_equal(c.err.e.code, SMUX_E_BAD_RESPONSE);
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static void test_auth(void **state)
{
	struct smux__http *anon = client(1, 0, NULL, NULL);
	struct smux__http *bad = client(1, 0, "user", "hunter2");
	struct smux__http *good = client(1, 0, "user", "secret");
	char text[1024];
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	assert_int_equal(do_get(anon, &ctx, &c, "GET", "/auth"), -EACCES);
	assert_int_equal(c.err.e.code, SMUX_E_PERMISSION_DENIED);
	smux_sink_release(&c.sink);
	memset(&c, 0, sizeof(c));
	assert_int_equal(do_get(bad, &ctx, &c, "GET", "/auth"), -EACCES);
	assert_int_equal(c.err.e.code, SMUX_E_CREDENTIAL_EXPIRED);
	assert_int_equal(smux_error_class(&c.err.e), SMUX_CLASS_SEMANTIC);
	assert_int_equal(c.err.cause.http_status, 401);
	smux_error_format(&c.err, text, sizeof(text));
	assert_null(strstr(text, "hunter2"));
	smux_sink_release(&c.sink);
	memset(&c, 0, sizeof(c));
	assert_int_equal(do_get(good, &ctx, &c, "GET", "/auth"), 0);
	assert_string_equal((const char *)c.sink.u.dyn.buf, "welcome");
	smux_sink_release(&c.sink);
	smux__http_free(anon);
	smux__http_free(bad);
	smux__http_free(good);
}

/* A 3 MiB body generated as curl asks for it (never in memory whole). */
static long gen_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	unsigned char *d = dst;

	(void)arg;
	for (size_t i = 0; i < len; i++)
		d[i] = (unsigned char)((pos + i) % 251);
	return (long)len;
}

static void test_put_streams_source(void **state)
{
	const uint64_t n = 3u << 20;
	struct smux__http *h = client(1, 0, NULL, NULL);
	struct smux_source src;
	unsigned long sum = 0;
	char want[64];
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	for (uint64_t i = 0; i < n; i++)
		sum += (i % 251);
	snprintf(want, sizeof(want), "PUT %llu %lu", (unsigned long long)n,
		 sum & 0xFFFFFFFFul);
	smux_source_cb(&src, gen_read, NULL, n);
	smux_ctx_init(&ctx);
	c.req.body = &src;
	assert_int_equal(do_get(h, &ctx, &c, "PUT", "/echo"), 0);
	assert_string_equal((const char *)c.sink.u.dyn.buf, want);
	smux_sink_release(&c.sink);
	/* a body with another method (PROPFIND carries XML) */
	memset(&c, 0, sizeof(c));
	smux_source_buf(&src, "abc", 3);
	c.req.body = &src;
	assert_int_equal(do_get(h, &ctx, &c, "PROPFIND", "/echo"), 0);
	assert_string_equal((const char *)c.sink.u.dyn.buf, "PROPFIND 3 294");
	smux_sink_release(&c.sink);
	/* a server that answers 201 after 64 KiB of 64 MiB and closes:
	 * libcurl ends the transfer with CURLE_OK, the upload is not */
	memset(&c, 0, sizeof(c));
	smux_source_cb(&src, gen_read, NULL, (uint64_t)64 << 20);
	c.req.body = &src;
	c.req.body_once = true;
	assert_int_equal(do_get(h, &ctx, &c, "PUT", "/early"), -EIO);
	assert_int_equal(c.err.e.code, SMUX_E_BAD_RESPONSE);
	assert_non_null(strstr(c.err.e.message, "before the whole body"));
	smux_sink_release(&c.sink);
	smux__http_free(h);
}

static long failing_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)arg;
	(void)dst;
	(void)len;
	return pos > 100000 ? -ENOSPC : (long)len;
}

static int full_sink(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return -ENOSPC;
}

static void test_local_failures(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_source src;
	struct smux_ctx ctx;
	struct call c = {0};

	(void)state;
	smux_ctx_init(&ctx);
	/* the source fails: LOCAL, not retried */
	smux_source_cb(&src, failing_read, NULL, 1u << 20);
	c.req.body = &src;
	assert_int_equal(do_get(h, &ctx, &c, "PUT", "/echo"), -ENOSPC);
	assert_int_equal(c.err.e.code, SMUX_E_LOCAL_IO);
	assert_int_equal(c.err.e.attempts, 1);
	smux_sink_release(&c.sink);
	/* the sink fails: LOCAL, not retried */
	memset(&c, 0, sizeof(c));
	snprintf(c.url, sizeof(c.url), "%s/ok/100", base);
	c.req.method = "GET";
	c.req.url = c.url;
	smux_sink_cb(&c.sink, full_sink, NULL, NULL);
	c.req.sink = &c.sink;
	assert_int_equal(smux__http_do(h, &ctx, &c.req, &c.resp, &c.err),
			 -ENOSPC);
	assert_int_equal(c.err.e.code, SMUX_E_LOCAL_IO);
	assert_int_equal(smux_error_class(&c.err.e), SMUX_CLASS_LOCAL);
	smux__http_free(h);
}

static void test_connection_refused(void **state)
{
	struct smux__http *h = client(2, 0, NULL, NULL);
	struct smux__http_req req = {.method = "GET"};
	struct smux__http_resp resp;
	struct smux_error err;
	struct smux_ctx ctx;
	char url[64];

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", ts_free_port());
	req.url = url;
	smux_ctx_init(&ctx);
	assert_true(smux__http_do(h, &ctx, &req, &resp, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_CONNECTION);
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);
	assert_int_equal(err.e.attempts, 2);
	smux__http_free(h);
}

struct canceller {
	struct smux__http *h;
	struct smux_cancel *token;
	long hang_before;
};

/* Fires the token once the server holds the request (polled, bounded). */
static void *cancel_when_hung(void *arg)
{
	struct canceller *k = arg;

	for (int i = 0; i < 1000; i++) {
		if (server_number(k->h, "/hits/hang") > k->hang_before)
			break;
		usleep(10000);
	}
	smux_cancel_fire(k->token, SMUX_CANCEL_ABORT);
	return NULL;
}

static void test_cancel(void **state)
{
	struct smux__http *h = client(3, 0, NULL, NULL);
	struct smux_cancel token;
	struct canceller k = {.h = h, .token = &token};
	struct smux_ctx ctx, root;
	struct call c = {0};
	pthread_t t;

	(void)state;
	smux_cancel_init(&token);
	smux_ctx_init(&root);
	smux_ctx_derive(&ctx, &root, 0, &token);
	k.hang_before = server_number(h, "/hits/hang");
	pthread_create(&t, NULL, cancel_when_hung, &k);
	assert_int_equal(do_get(h, &ctx, &c, "GET", "/hang"), -EINTR);
	assert_int_equal(c.err.e.code, SMUX_E_BACKEND_ABORTED);
	assert_int_equal(c.err.e.attempts, 1);
	pthread_join(t, NULL);
	smux_sink_release(&c.sink);
	smux_cancel_release(&token);
	smux__http_free(h);
}

static void test_escape(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(
		smux__http_escape("a b/c+d%é", 10, true, out, sizeof(out)),
		strlen("a%20b/c%2Bd%25%C3%A9"));
	assert_string_equal(out, "a%20b/c%2Bd%25%C3%A9");
	assert_int_equal(smux__http_escape("a/b", 3, false, out, sizeof(out)),
			 5);
	assert_string_equal(out, "a%2Fb");
	assert_int_equal(smux__http_escape("abcdef", 6, true, out, 6),
			 -ENAMETOOLONG);
	assert_int_equal(
		smux__http_unescape("a%20b%2fc%C3%A9", 15, out, sizeof(out)),
		strlen("a b/cé"));
	assert_string_equal(out, "a b/cé");
	assert_int_equal(smux__http_unescape("a%2", 3, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(smux__http_unescape("a%zz", 4, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(smux__http_unescape("a%00", 4, out, sizeof(out)),
			 -EINVAL);
	assert_true(smux__http_parse_date("Sun, 06 Nov 1994 08:49:37 GMT") ==
		    784111777LL * 1000000000LL);
	assert_true(smux__http_parse_date("yesterday-ish") < 0);
}

/* HTTPS: verified against a ca_file, refused without it. */
static void test_tls_ca_file(void **state)
{
	char cert[128], key[128], cmd[512], url[96];
	struct smux__http_opts o = {.backend = "tls", .max_attempts = 1};
	struct smux__http_req req = {.method = "GET", .what = "GET /ok/10"};
	struct smux__http_resp resp;
	struct smux_error err;
	struct smux__http *h;
	struct smux_sink sink;
	struct smux_ctx ctx;

	(void)state;
	if (!server.pid)
		skip();
	if (access("/usr/bin/openssl", X_OK) != 0) {
		fprintf(stderr, "*** SKIPPING test_tls_ca_file: no openssl "
				"(scripts/install-deps.sh installs it) ***\n");
		skip();
	}
	snprintf(cert, sizeof(cert), "%s/cert.pem", server_dir);
	snprintf(key, sizeof(key), "%s/key.pem", server_dir);
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes "
		 "-keyout %s -out %s -days 2 -subj /CN=127.0.0.1 "
		 "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
		 key, cert);
	assert_int_equal(system(cmd), 0);
	if (!tls_server.pid)
		assert_int_equal(ts_script_server_start_tls(
					 &tls_server, server_dir, cert, key),
				 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/ok/10",
		 tls_server.port);
	req.url = url;
	smux_ctx_init(&ctx);
	/* the system's bundle does not know this certificate */
	assert_int_equal(smux__http_new(&o, &h, &err), 0);
	assert_true(smux__http_do(h, &ctx, &req, &resp, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_CONNECTION);
	smux__http_free(h);
	/* with it as ca_file the same request succeeds */
	o.ca_file = cert;
	assert_int_equal(smux__http_new(&o, &h, &err), 0);
	smux_sink_dyn(&sink);
	req.sink = &sink;
	assert_int_equal(smux__http_do(h, &ctx, &req, &resp, &err), 0);
	assert_int_equal(sink.written, 10);
	smux_sink_release(&sink);
	smux__http_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_get_streams_body),
		cmocka_unit_test(test_connection_reused),
		cmocka_unit_test(test_retry_after_503),
		cmocka_unit_test(test_retry_after_past_deadline),
		cmocka_unit_test(test_429),
		cmocka_unit_test(test_statuses),
		cmocka_unit_test(test_hang_fails_at_deadline),
		cmocka_unit_test(test_idle_timeout),
		cmocka_unit_test(test_slow_steady_body),
		cmocka_unit_test(test_truncated_body),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_max_body),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_put_streams_source),
		cmocka_unit_test(test_local_failures),
		cmocka_unit_test(test_connection_refused),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_tls_ca_file),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
