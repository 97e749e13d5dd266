// SPDX-License-Identifier: MIT
/*
 * test_http_prepare.c - the HTTP layer's per-attempt hook
 * (struct smux__http_req.prepare), which the s3 backend uses to sign every
 * attempt afresh: it runs before each attempt, retries included, its
 * headers are the ones sent, and its failure fails the request without
 * sending anything.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/http_client.h"
#include "support/test_server.h"

static struct ts_server server;
static char dir[64] = "/tmp/smux-test-prep-XXXXXX";
static char base[64];

static int start(void **state)
{
	(void)state;
	if (!mkdtemp(dir) || ts_script_server_start(&server, dir) < 0)
		return -1;
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", server.port);
	return 0;
}

static int stop(void **state)
{
	char p[96];

	(void)state;
	ts_server_stop(&server);
	snprintf(p, sizeof(p), "%s/port", dir);
	unlink(p);
	rmdir(dir);
	return 0;
}

struct prep {
	unsigned calls;
	int fail_with; /* 0: succeed */
	char line[64];
	const char *hdrs[2];
};

static int prepare(void *arg, const char *const **headers,
		   struct smux_error *err)
{
	struct prep *p = arg;

	p->calls++;
	if (p->fail_with)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, "t",
				      "cannot sign");
	snprintf(p->line, sizeof(p->line), "X-Attempt: %u", p->calls);
	p->hdrs[0] = p->line;
	p->hdrs[1] = NULL;
	*headers = p->hdrs;
	return 0;
}

static struct smux__http *client(void)
{
	struct smux__http_opts o = {.backend = "t", .backoff_base_ms = 1};
	struct smux__http *h = NULL;
	struct smux_error err;

	assert_int_equal(smux__http_new(&o, &h, &err), 0);
	return h;
}

/* A 503 then a 200: the hook ran once per attempt. */
static void test_prepare_per_attempt(void **state)
{
	struct smux__http *h = client();
	struct prep p = {0};
	char url[128];
	struct smux__http_req req = {.method = "GET",
				     .url = url,
				     .prepare = prepare,
				     .prepare_arg = &p};
	struct smux__http_resp resp;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	snprintf(url, sizeof(url), "%s/once/503/prep1", base);
	assert_int_equal(smux__http_do(h, &ctx, &req, &resp, &err), 0);
	assert_int_equal(resp.attempts, 2);
	assert_int_equal(p.calls, 2);
	smux__http_free(h);
}

/* The hook's failure is the request's, and nothing is sent. */
static void test_prepare_failure(void **state)
{
	struct smux__http *h = client();
	struct prep p = {.fail_with = 1};
	char url[128];
	struct smux__http_req req = {.method = "GET",
				     .url = url,
				     .prepare = prepare,
				     .prepare_arg = &p};
	struct smux__http_resp resp;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	memset(&resp, 0, sizeof(resp));
	snprintf(url, sizeof(url), "%s/once/200/prep2", base);
	assert_true(smux__http_do(h, &ctx, &req, &resp, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_INVALID_ARGUMENT);
	assert_int_equal(p.calls, 1);
	assert_int_equal(resp.status, 0);
	smux__http_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prepare_per_attempt),
		cmocka_unit_test(test_prepare_failure),
	};

	return cmocka_run_group_tests(tests, start, stop);
}
