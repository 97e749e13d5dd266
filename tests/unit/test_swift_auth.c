// SPDX-License-Identifier: MIT
/*
 * test_swift_auth.c - the swift backend's tokens against the identity
 * v2.0 emulator alone (tests/servers/swift_identity.py with no Swift
 * behind it: a storage request with a valid token gets 204 to a HEAD), so
 * it costs no Swift start and runs in `make check`: the default region, an
 * internal endpoint with password credentials, a region without an
 * endpoint, a token revoked mid-run renewed once, renewal before expiry,
 * CREDENTIAL_EXPIRED when the renewal is refused, 429/503 retried, threads
 * sharing one token. The same against a real Swift, with objects, is
 * test_swift_live (`make check-swift`).
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

#include "smux/swift.h"
#include "support/swift_server.h"

static struct ts_swift srv;

static int group_setup(void **state)
{
	(void)state;
	return ts_swift_identity_alone(&srv) == 0 ? 0 : -1;
}

static void knobs(const char *json)
{
	assert_int_equal(ts_swift_control(json, NULL, 0), 0);
}

static void reset_knobs(void)
{
	knobs("{\"lifetime\":3600,\"refuse_auth\":false,"
	      "\"default_region\":\"ORD\",\"listing\":null}");
}

static struct smux_backend *v2_new(const char *region, bool internal,
				   bool password)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;

	o.auth = SMUX_SWIFT_AUTH_V2;
	o.auth_url = srv.identity;
	o.username = TS_SWIFT_V2_USER;
	if (password)
		o.password = TS_SWIFT_V2_PASSWORD;
	else
		o.key = TS_SWIFT_V2_APIKEY;
	o.region = region;
	o.internal = internal;
	o.container = "c";
	o.max_attempts = 4;
	if (smux_swift_new("sw2", &o, &b, &err) != 0)
		fail_msg("swift_new: %s", err.e.message);
	return b;
}

/* A HEAD of the container: one storage request with the token. */
static int probe(struct smux_backend *b, struct smux_error *err)
{
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	return smux_backend_healthcheck(b, &ctx, err);
}

static unsigned long storage_count(const char *label)
{
	char ans[1024], pat[64], *p;

	assert_int_equal(ts_swift_control(NULL, ans, sizeof(ans)), 0);
	snprintf(pat, sizeof(pat), "\"%s\": ", label);
	p = strstr(ans, pat);
	return p ? strtoul(p + strlen(pat), NULL, 10) : 0;
}

static void test_default_region(void **state)
{
	unsigned long ord = storage_count("ORD-public");
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	/* the user's RAX-AUTH:defaultRegion (ORD), public endpoint */
	assert_int_equal(storage_count("ORD-public"), ord + 1);
	assert_int_equal(smux_swift_auth_count(b), 1);
	smux_backend_unref(b);
}

static void test_internal_password(void **state)
{
	unsigned long n = storage_count("DFW-internal");
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	b = v2_new("DFW", true, true);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(storage_count("DFW-internal"), n + 1);
	smux_backend_unref(b);
}

static void test_no_endpoint(void **state)
{
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	b = v2_new("SYD", false, false);
	assert_int_equal(probe(b, &err),
			 -smux_code_errno(SMUX_E_INVALID_OPTIONS));
	assert_int_equal(err.e.code, SMUX_E_INVALID_OPTIONS);
	assert_non_null(strstr(err.e.message, "\"SYD\""));
	assert_non_null(strstr(err.e.message, "DFW, ORD"));
	smux_backend_unref(b);
	knobs("{\"default_region\":\"\"}");
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err),
			 -smux_code_errno(SMUX_E_INVALID_OPTIONS));
	assert_non_null(strstr(err.e.message, "set region"));
	smux_backend_unref(b);
	reset_knobs();
}

static void test_wrong_key(void **state)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	struct smux_backend *b = NULL;

	(void)state;
	reset_knobs();
	o.auth = SMUX_SWIFT_AUTH_V2;
	o.auth_url = srv.identity;
	o.username = TS_SWIFT_V2_USER;
	o.key = "not-the-key";
	o.container = "c";
	assert_int_equal(smux_swift_new("sw2", &o, &b, &err), 0);
	assert_int_equal(probe(b, &err), -EACCES);
	assert_int_equal(err.e.code, SMUX_E_CREDENTIAL_EXPIRED);
	assert_null(strstr(err.e.message, "not-the-key"));
	smux_backend_unref(b);
}

static void test_revoked_then_refused(void **state)
{
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 1);
	/* the token dies mid-run: one more auth, nothing fails */
	knobs("{\"revoke\":true}");
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 2);
	/* revoked again and the service refuses: CREDENTIAL_EXPIRED */
	knobs("{\"revoke\":true,\"refuse_auth\":true}");
	assert_int_equal(probe(b, &err), -EACCES);
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

static void test_renew_before_expiry(void **state)
{
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	/* tokens live 30 s and are renewed 60 s before expiry: every call
	 * renews first, none meets an expired token */
	knobs("{\"lifetime\":30}");
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 1);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 2);
	smux_backend_unref(b);
	reset_knobs();
	/* an hour: kept */
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 1);
	smux_backend_unref(b);
}

static void test_throttled(void **state)
{
	struct smux_error err = {0};
	struct smux_backend *b;

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	knobs("{\"fail\":{\"status\":429,\"count\":2,\"retry_after\":0}}");
	assert_int_equal(probe(b, &err), 0);
	/* the renewal after a revocation meets a 503 first */
	knobs("{\"fail\":{\"status\":503,\"count\":1,\"target\":\"auth\"}}");
	knobs("{\"revoke\":true}");
	assert_int_equal(probe(b, &err), 0);
	assert_int_equal(smux_swift_auth_count(b), 2);
	/* throttled for longer than the attempts last: the error says so */
	knobs("{\"fail\":{\"status\":429,\"count\":4,\"retry_after\":0}}");
	assert_int_equal(probe(b, &err), -EAGAIN);
	assert_int_equal(err.e.http_status, 429);
	smux_backend_unref(b);
}

struct worker {
	struct smux_backend *b;
	int failures;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct smux_error err = {0};

	for (int i = 0; i < 8; i++)
		if (probe(w->b, &err) != 0)
			w->failures++;
	return NULL;
}

/* Threads share one token; a revocation in the middle of their run costs
 * one renewal between them (a 401 drops only the token it answered),
 * never a failed call. */
static void test_threads_share_token(void **state)
{
	struct smux_error err = {0};
	struct smux_backend *b;
	struct worker w[4];
	pthread_t t[4];

	(void)state;
	reset_knobs();
	b = v2_new(NULL, false, false);
	assert_int_equal(probe(b, &err), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.b = b};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	knobs("{\"revoke\":true}");
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	assert_true(smux_swift_auth_count(b) <= 2);
	smux_backend_unref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_region),
		cmocka_unit_test(test_internal_password),
		cmocka_unit_test(test_no_endpoint),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_revoked_then_refused),
		cmocka_unit_test(test_renew_before_expiry),
		cmocka_unit_test(test_throttled),
		cmocka_unit_test(test_threads_share_token),
	};

	return cmocka_run_group_tests_name("swift_auth", tests, group_setup,
					   NULL);
}
