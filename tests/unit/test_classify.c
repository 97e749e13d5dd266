/* SPDX-License-Identifier: MIT */
/*
 * test_classify.c - smux_classify() against the seed's section 4 table, one
 * row per error shape, plus smux_outcome_name() and the mode names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "smux/error.h"
#include "smux/mux.h"

struct row {
	const char *what;
	enum smux_code code;
	int http_status;
	int sys_errno;
	enum smux_outcome want;
};

#define T SMUX_OUTCOME_TRANSIENT
#define S SMUX_OUTCOME_SEMANTIC

static const struct row rows[] = {
	/* abort */
	{"caller aborted", SMUX_E_BACKEND_ABORTED, 0, EINTR,
	 SMUX_OUTCOME_ABORT},
	/* semantic: never falls through */
	{"KEY_NOT_FOUND", SMUX_E_KEY_NOT_FOUND, 0, ENOENT, S},
	{"INVALID_KEY", SMUX_E_INVALID_KEY, 0, EINVAL, S},
	{"KEY_TOO_LONG", SMUX_E_KEY_TOO_LONG, 0, ENAMETOOLONG, S},
	{"PERMISSION_DENIED", SMUX_E_PERMISSION_DENIED, 0, EACCES, S},
	{"CREDENTIAL_EXPIRED", SMUX_E_CREDENTIAL_EXPIRED, 0, EACCES, S},
	{"HTTP 400", SMUX_E_HTTP, 400, EINVAL, S},
	{"HTTP 401", SMUX_E_HTTP, 401, EINVAL, S},
	{"HTTP 403", SMUX_E_HTTP, 403, EINVAL, S},
	{"HTTP 404", SMUX_E_HTTP, 404, EINVAL, S},
	{"HTTP 409", SMUX_E_HTTP, 409, EINVAL, S},
	{"HTTP 412", SMUX_E_HTTP, 412, EINVAL, S},
	{"HTTP 499", SMUX_E_HTTP, 499, EINVAL, S},
	/* transient: falls through, counts against health */
	{"HTTP 408", SMUX_E_HTTP, 408, ETIMEDOUT, T},
	{"HTTP 429", SMUX_E_HTTP, 429, EAGAIN, T},
	{"HTTP 500", SMUX_E_HTTP, 500, EIO, T},
	{"HTTP 502", SMUX_E_HTTP, 502, EIO, T},
	{"HTTP 503", SMUX_E_HTTP, 503, EAGAIN, T},
	{"HTTP 504", SMUX_E_HTTP, 504, ETIMEDOUT, T},
	{"HTTP without status", SMUX_E_HTTP, 0, EIO, T},
	{"ECONNRESET", SMUX_E_CONNECTION, 0, ECONNRESET, T},
	{"ETIMEDOUT on a connection", SMUX_E_CONNECTION, 0, ETIMEDOUT, T},
	{"IO", SMUX_E_IO, 0, EIO, T},
	{"UNKNOWN", SMUX_E_UNKNOWN, 0, EIO, T},
	{"unknown code 9999", (enum smux_code)9999, 0, 0, T},
	{"code SMUX_CODE_COUNT", SMUX_CODE_COUNT, 0, 0, T},
	{"negative code", (enum smux_code) - 3, 0, 0, T},
	{"BACKEND_DRAINING", SMUX_E_BACKEND_DRAINING, 0, EAGAIN, T},
	/* only the bulkhead's deadline is a timeout */
	{"BACKEND_TIMEOUT", SMUX_E_BACKEND_TIMEOUT, 0, ETIMEDOUT,
	 SMUX_OUTCOME_TIMEOUT},
	/* the caller's own sink or source: stops, no health penalty */
	{"LOCAL_IO ENOSPC", SMUX_E_LOCAL_IO, 0, ENOSPC, SMUX_OUTCOME_LOCAL},
	{"LOCAL_IO EIO", SMUX_E_LOCAL_IO, 0, EIO, SMUX_OUTCOME_LOCAL},
	/* success */
	{"OK", SMUX_OK, 0, 0, SMUX_OUTCOME_OK},
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct smux_error_info e;
		enum smux_outcome got;

		memset(&e, 0, sizeof(e));
		e.code = rows[i].code;
		e.http_status = rows[i].http_status;
		e.sys_errno = rows[i].sys_errno;
		got = smux_classify(&e);
		if (got != rows[i].want)
			fail_msg("row \"%s\": got %s, want %s", rows[i].what,
				 smux_outcome_name(got),
				 smux_outcome_name(rows[i].want));
	}
}

/* Errors built the way backends build them classify the same way. */
static void test_from_helpers(void **state)
{
	struct smux_error err;

	(void)state;
	smux_error_from_http(&err, 404, "b", "get");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_SEMANTIC);
	smux_error_from_http(&err, 409, "b", "put");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_SEMANTIC);
	smux_error_from_http(&err, 429, "b", "get");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_TRANSIENT);
	smux_error_from_http(&err, 503, "b", "get");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_TRANSIENT);
	/* a WebDAV lock held by another client (s44-t2: EINVAL, and mv
	 * said "cannot move to a subdirectory of itself") */
	assert_int_equal(smux_error_from_http(&err, 423, "b", "del"), -EBUSY);
	assert_int_equal(err.e.sys_errno, EBUSY);
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_SEMANTIC);
	assert_int_equal(smux_error_from_http(&err, 400, "b", "put"), -EINVAL);
	smux_error_from_errno(&err, ECONNRESET, "b", "read");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_TRANSIENT);
	smux_error_from_errno(&err, ENOENT, "b", "open");
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_SEMANTIC);
	smux_error_set(&err, SMUX_E_BACKEND_ABORTED, "b", NULL);
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_ABORT);
	smux_error_set(&err, SMUX_E_BACKEND_TIMEOUT, "b", NULL);
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_TIMEOUT);
	/* A wrapped error is classified by its outer code. */
	smux_error_from_http(&err, 404, "b", "get");
	smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, NULL, NULL);
	assert_int_equal(smux_classify(&err.e), SMUX_OUTCOME_TRANSIENT);
	assert_int_equal(smux_classify(NULL), SMUX_OUTCOME_OK);
}

/* Every code has a definite outcome that agrees with its class. */
static void test_every_code(void **state)
{
	(void)state;
	for (int c = 1; c < SMUX_CODE_COUNT; c++) {
		struct smux_error_info e = {.code = (enum smux_code)c};
		enum smux_outcome o = smux_classify(&e);
		enum smux_class k = smux_code_class((enum smux_code)c);

		if (c == SMUX_E_BACKEND_TIMEOUT)
			assert_int_equal(o, SMUX_OUTCOME_TIMEOUT);
		else if (k == SMUX_CLASS_ABORT)
			assert_int_equal(o, SMUX_OUTCOME_ABORT);
		else if (k == SMUX_CLASS_SEMANTIC)
			assert_int_equal(o, SMUX_OUTCOME_SEMANTIC);
		else if (k == SMUX_CLASS_LOCAL)
			assert_int_equal(o, SMUX_OUTCOME_LOCAL);
		else
			assert_int_equal(o, SMUX_OUTCOME_TRANSIENT);
	}
}

static void test_outcome_names(void **state)
{
	(void)state;
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_OK), "ok");
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_TRANSIENT),
			    "transient");
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_SEMANTIC),
			    "semantic");
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_ABORT), "abort");
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_TIMEOUT), "timeout");
	assert_string_equal(smux_outcome_name(SMUX_OUTCOME_LOCAL), "local");
	assert_string_equal(smux_outcome_name((enum smux_outcome)42),
			    "unknown");
}

static void test_mode_names(void **state)
{
	static const char *const names[] = {
		"failover",	 "round-robin", "weighted",
		"sticky-by-key", "shield",	"mirror",
	};
	enum smux_mode m;

	(void)state;
	assert_int_equal(sizeof(names) / sizeof(names[0]), SMUX_MODE_COUNT);
	for (int i = 0; i < SMUX_MODE_COUNT; i++) {
		assert_string_equal(smux_mode_name((enum smux_mode)i),
				    names[i]);
		m = SMUX_MODE_COUNT;
		assert_int_equal(smux_mode_parse(names[i], &m), 0);
		assert_int_equal(m, i);
	}
	assert_string_equal(smux_mode_name(SMUX_MODE_COUNT), "unknown");
	m = SMUX_MODE_MIRROR;
	assert_int_equal(smux_mode_parse("Failover", &m), -EINVAL);
	assert_int_equal(smux_mode_parse("failover ", &m), -EINVAL);
	assert_int_equal(smux_mode_parse("round_robin", &m), -EINVAL);
	assert_int_equal(smux_mode_parse("", &m), -EINVAL);
	assert_int_equal(smux_mode_parse(NULL, &m), -EINVAL);
	assert_int_equal(m, SMUX_MODE_MIRROR); /* untouched on error */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_from_helpers),
		cmocka_unit_test(test_every_code),
		cmocka_unit_test(test_outcome_names),
		cmocka_unit_test(test_mode_names),
	};

	return cmocka_run_group_tests_name("classify", tests, NULL, NULL);
}
