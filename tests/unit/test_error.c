/* SPDX-License-Identifier: MIT */
/*
 * test_error.c - the code table and the helpers of smux/error.h: every code
 * named, classed and mapped to an errno; the seed's spellings; errno and
 * HTTP mappings; wrapping; formatting and truncation; NULL errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "smux/error.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The prefix a code's name must carry, from its group in error.h. */
static const char *expected_prefix(enum smux_code c)
{
	if ((c >= SMUX_E_KEY_NOT_FOUND && c <= SMUX_E_UNKNOWN) ||
	    c == SMUX_E_NO_ATTR || c == SMUX_E_LOCAL_IO)
		return "STORAGE.";
	if (c == SMUX_E_CREDENTIAL_EXPIRED)
		return "STORAGE_CDN.";
	return "STORAGE_MUX.";
}

/* ---- the code table ---- */

static void test_every_code_named_classed_mapped(void **state)
{
	(void)state;
	for (int c = 1; c < SMUX_CODE_COUNT; c++) {
		const char *name = smux_code_name((enum smux_code)c);
		const char *prefix = expected_prefix((enum smux_code)c);
		const char *msg = smux_code_message((enum smux_code)c);
		enum smux_class cls = smux_code_class((enum smux_code)c);

		assert_non_null(name);
		assert_true(starts_with(name, prefix));
		/* a non-empty suffix of A-Z and '_' after the prefix */
		assert_true(strlen(name) > strlen(prefix));
		for (const char *p = name + strlen(prefix); *p; p++)
			assert_true((*p >= 'A' && *p <= 'Z') || *p == '_');
		assert_non_null(msg);
		assert_true(msg[0] != '\0');
		assert_true(
			cls == SMUX_CLASS_ABORT || cls == SMUX_CLASS_SEMANTIC ||
			cls == SMUX_CLASS_TRANSIENT || cls == SMUX_CLASS_LOCAL);
		assert_true(smux_code_errno((enum smux_code)c) > 0);
		for (int d = 0; d < c; d++)
			assert_string_not_equal(
				name, smux_code_name((enum smux_code)d));
	}
}

static void test_ok_code(void **state)
{
	(void)state;
	assert_string_equal(smux_code_name(SMUX_OK), "OK");
	assert_true(smux_code_message(SMUX_OK)[0] != '\0');
	assert_int_equal(smux_code_class(SMUX_OK), SMUX_CLASS_NONE);
	assert_int_equal(smux_code_errno(SMUX_OK), 0);
}

static void test_from_name_round_trips(void **state)
{
	static const char *const unknown[] = {
		"",
		"STORAGE.",
		"STORAGE.NOPE",
		"storage.key_not_found",
		"STORAGE.KEY_NOT_FOUND ",
		"KEY_NOT_FOUND",
		"STORAGE_MUX.KEY_NOT_FOUND",
	};

	(void)state;
	for (int c = 0; c < SMUX_CODE_COUNT; c++)
		assert_int_equal(
			smux_code_from_name(smux_code_name((enum smux_code)c)),
			c);
	for (size_t i = 0; i < ARRAY_SIZE(unknown); i++)
		assert_int_equal(smux_code_from_name(unknown[i]),
				 SMUX_CODE_COUNT);
	assert_int_equal(smux_code_from_name(NULL), SMUX_CODE_COUNT);
}

static void test_out_of_range_code_is_unknown(void **state)
{
	(void)state;
	assert_string_equal(smux_code_name(SMUX_CODE_COUNT), "STORAGE.UNKNOWN");
	assert_string_equal(smux_code_name((enum smux_code)1000),
			    "STORAGE.UNKNOWN");
	assert_int_equal(smux_code_errno(SMUX_CODE_COUNT), EIO);
	assert_int_equal(smux_code_class(SMUX_CODE_COUNT),
			 SMUX_CLASS_TRANSIENT);
}

/* The seed's spellings and DESIGN section 5's errnos, verbatim. */
static const struct {
	enum smux_code code;
	const char *name;
	int sys_errno; /* 0: not fixed by DESIGN */
	enum smux_class cls;
} seed_codes[] = {
	{SMUX_E_ALL_BACKENDS_DOWN, "STORAGE_MUX.ALL_BACKENDS_DOWN", EIO,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_BACKEND_TIMEOUT, "STORAGE_MUX.BACKEND_TIMEOUT", ETIMEDOUT,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_BACKEND_ABORTED, "STORAGE_MUX.BACKEND_ABORTED", EINTR,
	 SMUX_CLASS_ABORT},
	{SMUX_E_WRITE_FANOUT_PARTIAL, "STORAGE_MUX.WRITE_FANOUT_PARTIAL", 0,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_INVALID_WEIGHT, "STORAGE_MUX.INVALID_WEIGHT", 0,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_WEIGHTED_REQUIRES_WEIGHTS,
	 "STORAGE_MUX.WEIGHTED_REQUIRES_WEIGHTS", 0, SMUX_CLASS_SEMANTIC},
	{SMUX_E_BACKEND_NAME_CONFLICT, "STORAGE_MUX.BACKEND_NAME_CONFLICT", 0,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_RECURSION_DEPTH_EXCEEDED,
	 "STORAGE_MUX.RECURSION_DEPTH_EXCEEDED", 0, SMUX_CLASS_SEMANTIC},
	{SMUX_E_HEALTHCHECK_FAILED, "STORAGE_MUX.HEALTHCHECK_FAILED", 0,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_MIRROR_ORIGIN_REQUIRED, "STORAGE_MUX.MIRROR_ORIGIN_REQUIRED", 0,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_BACKEND_DRAINING, "STORAGE_MUX.BACKEND_DRAINING", 0,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_KEY_NOT_FOUND, "STORAGE.KEY_NOT_FOUND", ENOENT,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_INVALID_KEY, "STORAGE.INVALID_KEY", EINVAL,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_KEY_TOO_LONG, "STORAGE.KEY_TOO_LONG", ENAMETOOLONG,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_PERMISSION_DENIED, "STORAGE.PERMISSION_DENIED", EACCES,
	 SMUX_CLASS_SEMANTIC},
	{SMUX_E_NO_SPACE, "STORAGE.NO_SPACE", ENOSPC, SMUX_CLASS_TRANSIENT},
	{SMUX_E_LOCAL_IO, "STORAGE.LOCAL_IO_ERROR", EIO, SMUX_CLASS_LOCAL},
	{SMUX_E_CONNECTION, "STORAGE.CONNECTION_FAILED", EIO,
	 SMUX_CLASS_TRANSIENT},
	{SMUX_E_CREDENTIAL_EXPIRED, "STORAGE_CDN.CREDENTIAL_EXPIRED", EACCES,
	 SMUX_CLASS_SEMANTIC},
};

static void test_seed_spellings_and_errnos(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(seed_codes); i++) {
		assert_string_equal(smux_code_name(seed_codes[i].code),
				    seed_codes[i].name);
		assert_int_equal(smux_code_from_name(seed_codes[i].name),
				 seed_codes[i].code);
		if (seed_codes[i].sys_errno)
			assert_int_equal(smux_code_errno(seed_codes[i].code),
					 seed_codes[i].sys_errno);
		assert_int_equal(smux_code_class(seed_codes[i].code),
				 seed_codes[i].cls);
	}
}

static void test_class_names(void **state)
{
	(void)state;
	assert_string_equal(smux_class_name(SMUX_CLASS_NONE), "none");
	assert_string_equal(smux_class_name(SMUX_CLASS_ABORT), "abort");
	assert_string_equal(smux_class_name(SMUX_CLASS_SEMANTIC), "semantic");
	assert_string_equal(smux_class_name(SMUX_CLASS_TRANSIENT), "transient");
	assert_string_equal(smux_class_name(SMUX_CLASS_LOCAL), "local");
	assert_string_equal(smux_class_name((enum smux_class)42), "none");
}

/* ---- smux_error_set ---- */

/* An error with every field dirty, to show set/wrap replace them. */
static void dirty(struct smux_error *err)
{
	memset(err, 0x5a, sizeof(*err));
	err->e.message[sizeof(err->e.message) - 1] = '\0';
	err->e.backend[sizeof(err->e.backend) - 1] = '\0';
	err->cause.message[sizeof(err->cause.message) - 1] = '\0';
	err->cause.backend[sizeof(err->cause.backend) - 1] = '\0';
	err->has_cause = true;
}

/* Every code can be raised, and raising it fills a complete error. */
static void test_set_every_code(void **state)
{
	(void)state;
	for (int c = 0; c < SMUX_CODE_COUNT; c++) {
		struct smux_error err;
		int rc;

		dirty(&err);
		rc = smux_error_set(&err, (enum smux_code)c, "be", NULL);
		assert_int_equal(rc, -smux_code_errno((enum smux_code)c));
		assert_int_equal(err.e.code, c);
		assert_int_equal(err.e.sys_errno,
				 smux_code_errno((enum smux_code)c));
		assert_int_equal(err.e.http_status, 0);
		assert_int_equal(err.e.attempts, 0);
		assert_string_equal(err.e.backend, "be");
		assert_string_equal(err.e.message,
				    smux_code_message((enum smux_code)c));
		assert_false(err.has_cause);
		assert_int_equal(smux_error_class(&err.e),
				 smux_code_class((enum smux_code)c));
		assert_int_equal(
			smux_error_set(NULL, (enum smux_code)c, "be", NULL),
			rc);
	}
}

static void test_set_formats_message(void **state)
{
	struct smux_error err;
	int rc;

	(void)state;
	dirty(&err);
	rc = smux_error_set(&err, SMUX_E_KEY_NOT_FOUND, NULL, "no key %s (%d)",
			    "a/b", 7);
	assert_int_equal(rc, -ENOENT);
	assert_string_equal(err.e.message, "no key a/b (7)");
	assert_string_equal(err.e.backend, "");
	assert_false(err.has_cause);
}

static int call_setv(struct smux_error *err, enum smux_code code,
		     const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int call_setv(struct smux_error *err, enum smux_code code,
		     const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = smux_error_setv(err, code, "v", fmt, ap);
	va_end(ap);
	return rc;
}

static void test_setv(void **state)
{
	struct smux_error err;

	(void)state;
	assert_int_equal(call_setv(&err, SMUX_E_NO_SPACE, "%s=%u", "x", 3u),
			 -ENOSPC);
	assert_string_equal(err.e.message, "x=3");
	assert_string_equal(err.e.backend, "v");
	assert_int_equal(call_setv(NULL, SMUX_E_BACKEND_TIMEOUT, "t"),
			 -ETIMEDOUT);
}

static void test_long_message_and_backend_truncated(void **state)
{
	char longmsg[3 * SMUX_ERROR_MSG_MAX];
	char longname[3 * SMUX_ERROR_NAME_MAX];
	struct smux_error err;

	(void)state;
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';

	smux_error_set(&err, SMUX_E_IO, longname, "%s", longmsg);
	assert_int_equal(strlen(err.e.message), SMUX_ERROR_MSG_MAX - 1);
	assert_memory_equal(err.e.message, longmsg, SMUX_ERROR_MSG_MAX - 1);
	assert_int_equal(strlen(err.e.backend), SMUX_ERROR_NAME_MAX - 1);
	assert_memory_equal(err.e.backend, longname, SMUX_ERROR_NAME_MAX - 1);

	/* the same through from_errno and wrap */
	smux_error_from_errno(&err, EIO, longname, longmsg);
	assert_int_equal(strlen(err.e.message), SMUX_ERROR_MSG_MAX - 1);
	assert_int_equal(strlen(err.e.backend), SMUX_ERROR_NAME_MAX - 1);
	smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, longname, "%s",
			longmsg);
	assert_int_equal(strlen(err.e.message), SMUX_ERROR_MSG_MAX - 1);
	assert_int_equal(strlen(err.cause.message), SMUX_ERROR_MSG_MAX - 1);
}

static void test_clear(void **state)
{
	struct smux_error err, zero;

	(void)state;
	memset(&zero, 0, sizeof(zero));
	dirty(&err);
	smux_error_clear(&err);
	assert_memory_equal(&err, &zero, sizeof(err));
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_NONE);
	smux_error_clear(NULL);
}

/* ---- smux_error_from_errno ---- */

static const struct {
	int in;
	enum smux_code code;
	int out; /* the error's errno and -rc */
} errno_map[] = {
	{ENOENT, SMUX_E_KEY_NOT_FOUND, ENOENT},
	{ENAMETOOLONG, SMUX_E_KEY_TOO_LONG, ENAMETOOLONG},
	{EACCES, SMUX_E_PERMISSION_DENIED, EACCES},
	{EPERM, SMUX_E_PERMISSION_DENIED, EPERM},
	{EROFS, SMUX_E_PERMISSION_DENIED, EROFS},
	{ENOTEMPTY, SMUX_E_NOT_EMPTY, ENOTEMPTY},
	{EISDIR, SMUX_E_IS_DIRECTORY, EISDIR},
	{ENOTDIR, SMUX_E_NOT_DIRECTORY, ENOTDIR},
	{EEXIST, SMUX_E_ALREADY_EXISTS, EEXIST},
	{ENOTSUP, SMUX_E_NOT_SUPPORTED, ENOTSUP},
	{EINVAL, SMUX_E_INVALID_ARGUMENT, EINVAL},
	/* extended attributes: none of that name; a buffer too small, a
	 * value too large (their errno kept, for getxattr(2) callers) */
	{ENODATA, SMUX_E_NO_ATTR, ENODATA},
	{ERANGE, SMUX_E_INVALID_ARGUMENT, ERANGE},
	{E2BIG, SMUX_E_INVALID_ARGUMENT, E2BIG},
	/* a size past the backend's limit: the request, not the backend */
	{EFBIG, SMUX_E_INVALID_ARGUMENT, EFBIG},
	{EOVERFLOW, SMUX_E_INVALID_ARGUMENT, EOVERFLOW},
	{EMLINK, SMUX_E_INVALID_ARGUMENT, EMLINK},
	/* a path that would leave the root is an invalid key (EINVAL) */
	{EXDEV, SMUX_E_INVALID_KEY, EINVAL},
	{ELOOP, SMUX_E_INVALID_KEY, EINVAL},
	{ENOSPC, SMUX_E_NO_SPACE, ENOSPC},
	{EDQUOT, SMUX_E_NO_SPACE, EDQUOT},
	{ENOMEM, SMUX_E_NO_MEMORY, ENOMEM},
	/* a backend's own timeout; BACKEND_TIMEOUT is the bulkhead's */
	{ETIMEDOUT, SMUX_E_CONNECTION, ETIMEDOUT},
	{EINTR, SMUX_E_BACKEND_ABORTED, EINTR},
	{ECANCELED, SMUX_E_BACKEND_ABORTED, ECANCELED},
	{ECONNREFUSED, SMUX_E_CONNECTION, ECONNREFUSED},
	{ECONNRESET, SMUX_E_CONNECTION, ECONNRESET},
	{ECONNABORTED, SMUX_E_CONNECTION, ECONNABORTED},
	{EHOSTUNREACH, SMUX_E_CONNECTION, EHOSTUNREACH},
	{ENETUNREACH, SMUX_E_CONNECTION, ENETUNREACH},
	{EPIPE, SMUX_E_CONNECTION, EPIPE},
	{EIO, SMUX_E_IO, EIO},
	{EBADF, SMUX_E_IO, EBADF},
	{ENOBUFS, SMUX_E_IO, ENOBUFS},
	/* nonsense in: an I/O error out, never "no error" */
	{0, SMUX_E_IO, EIO},
	{-ENOENT, SMUX_E_IO, EIO},
};

static void test_from_errno_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(errno_map); i++) {
		struct smux_error err;
		char want[160];
		int rc;

		dirty(&err);
		rc = smux_error_from_errno(&err, errno_map[i].in, "file-a",
					   "open a/b");
		assert_int_equal(rc, -errno_map[i].out);
		assert_int_equal(err.e.code, errno_map[i].code);
		assert_int_equal(err.e.sys_errno, errno_map[i].out);
		assert_int_equal(err.e.http_status, 0);
		assert_string_equal(err.e.backend, "file-a");
		assert_false(err.has_cause);
		snprintf(want, sizeof(want), "open a/b: %s",
			 strerror(errno_map[i].in > 0 ? errno_map[i].in : EIO));
		assert_string_equal(err.e.message, want);
		assert_int_equal(smux_error_from_errno(NULL, errno_map[i].in,
						       NULL, NULL),
				 rc);
	}
}

/* ---- smux_error_from_http ---- */

static const struct {
	int status;
	enum smux_code code;
	int sys_errno;
	enum smux_class cls;
} http_map[] = {
	{404, SMUX_E_KEY_NOT_FOUND, ENOENT, SMUX_CLASS_SEMANTIC},
	{410, SMUX_E_KEY_NOT_FOUND, ENOENT, SMUX_CLASS_SEMANTIC},
	{401, SMUX_E_PERMISSION_DENIED, EACCES, SMUX_CLASS_SEMANTIC},
	{403, SMUX_E_PERMISSION_DENIED, EACCES, SMUX_CLASS_SEMANTIC},
	{412, SMUX_E_PRECONDITION_FAILED, ESTALE, SMUX_CLASS_SEMANTIC},
	{400, SMUX_E_HTTP, EINVAL, SMUX_CLASS_SEMANTIC},
	{409, SMUX_E_HTTP, EINVAL, SMUX_CLASS_SEMANTIC},
	{416, SMUX_E_HTTP, EINVAL, SMUX_CLASS_SEMANTIC},
	{408, SMUX_E_HTTP, ETIMEDOUT, SMUX_CLASS_TRANSIENT},
	{429, SMUX_E_HTTP, EAGAIN, SMUX_CLASS_TRANSIENT},
	{500, SMUX_E_HTTP, EIO, SMUX_CLASS_TRANSIENT},
	{502, SMUX_E_HTTP, EIO, SMUX_CLASS_TRANSIENT},
	{503, SMUX_E_HTTP, EAGAIN, SMUX_CLASS_TRANSIENT},
	{504, SMUX_E_HTTP, ETIMEDOUT, SMUX_CLASS_TRANSIENT},
	{507, SMUX_E_NO_SPACE, ENOSPC, SMUX_CLASS_TRANSIENT},
};

static void test_from_http_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(http_map); i++) {
		struct smux_error err;
		char want[64];
		int rc;

		dirty(&err);
		rc = smux_error_from_http(&err, http_map[i].status, "s3-a",
					  "GET a/b");
		assert_int_equal(rc, -http_map[i].sys_errno);
		assert_int_equal(err.e.code, http_map[i].code);
		assert_int_equal(err.e.sys_errno, http_map[i].sys_errno);
		assert_int_equal(err.e.http_status, http_map[i].status);
		assert_int_equal(smux_error_class(&err.e), http_map[i].cls);
		assert_string_equal(err.e.backend, "s3-a");
		snprintf(want, sizeof(want), "GET a/b: HTTP %d",
			 http_map[i].status);
		assert_string_equal(err.e.message, want);
		assert_false(err.has_cause);
		assert_int_equal(smux_error_from_http(NULL, http_map[i].status,
						      NULL, NULL),
				 rc);
	}
}

/* The class of SMUX_E_HTTP comes from the status, not from the code. */
static void test_error_class_of_http(void **state)
{
	struct smux_error_info e;

	(void)state;
	memset(&e, 0, sizeof(e));
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_NONE);
	assert_int_equal(smux_error_class(NULL), SMUX_CLASS_NONE);
	e.code = SMUX_E_HTTP;
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_TRANSIENT);
	e.http_status = 499;
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_SEMANTIC);
	e.http_status = 500;
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_TRANSIENT);
	e.http_status = 302;
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_TRANSIENT);
	/* a status never changes the class of a non-HTTP code */
	e.code = SMUX_E_BACKEND_ABORTED;
	e.http_status = 400;
	assert_int_equal(smux_error_class(&e), SMUX_CLASS_ABORT);
}

/* ---- smux_error_wrap ---- */

static void test_wrap_keeps_cause_and_attempts(void **state)
{
	struct smux_error err;
	int rc;

	(void)state;
	smux_error_from_http(&err, 404, "edge-a", "GET x");
	err.e.attempts = 3;
	rc = smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, "media",
			     "tried %d backends", 2);
	assert_int_equal(rc, -EIO);
	assert_int_equal(err.e.code, SMUX_E_ALL_BACKENDS_DOWN);
	assert_int_equal(err.e.sys_errno, EIO);
	assert_int_equal(err.e.http_status, 0);
	assert_int_equal(err.e.attempts, 3);
	assert_string_equal(err.e.backend, "media");
	assert_string_equal(err.e.message, "tried 2 backends");
	assert_true(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(err.cause.sys_errno, ENOENT);
	assert_int_equal(err.cause.http_status, 404);
	assert_int_equal(err.cause.attempts, 3);
	assert_string_equal(err.cause.backend, "edge-a");
	assert_string_equal(err.cause.message, "GET x: HTTP 404");
}

static void test_wrap_drops_older_cause(void **state)
{
	struct smux_error err;

	(void)state;
	smux_error_set(&err, SMUX_E_CONNECTION, "leaf", "refused");
	smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, "inner", NULL);
	assert_int_equal(
		smux_error_wrap(&err, SMUX_E_BACKEND_TIMEOUT, "outer", NULL),
		-ETIMEDOUT);
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_string_equal(err.e.message,
			    smux_code_message(SMUX_E_BACKEND_TIMEOUT));
	assert_true(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_E_ALL_BACKENDS_DOWN);
	assert_string_equal(err.cause.backend, "inner");
}

static void test_wrap_of_no_error_has_no_cause(void **state)
{
	struct smux_error err;

	(void)state;
	smux_error_clear(&err);
	assert_int_equal(
		smux_error_wrap(&err, SMUX_E_HEALTHCHECK_FAILED, NULL, "probe"),
		-EIO);
	assert_int_equal(err.e.code, SMUX_E_HEALTHCHECK_FAILED);
	assert_false(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_OK);
	assert_int_equal(
		smux_error_wrap(NULL, SMUX_E_BACKEND_ABORTED, "x", "y"),
		-EINTR);
}

/* ---- smux_error_format ---- */

static void test_format_exact(void **state)
{
	struct smux_error err;
	char buf[512];

	(void)state;
	smux_error_set(&err, SMUX_E_KEY_NOT_FOUND, "file-a", "no such key: %s",
		       "a/b");
	assert_ptr_equal(smux_error_format(&err, buf, sizeof(buf)), buf);
	assert_string_equal(buf,
			    "STORAGE.KEY_NOT_FOUND [file-a]: no such key: a/b");

	smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, NULL, NULL);
	smux_error_format(&err, buf, sizeof(buf));
	assert_string_equal(buf, "STORAGE_MUX.ALL_BACKENDS_DOWN: all backends "
				 "are down (cause: STORAGE.KEY_NOT_FOUND "
				 "[file-a]: no such key: a/b)");
}

/*
 * Every buffer size from 0 up gives a NUL-terminated prefix of the full
 * text and never writes past @size.
 */
static void test_format_truncates_safely(void **state)
{
	struct smux_error err;
	char full[1024], buf[1024];
	size_t full_len;

	(void)state;
	smux_error_set(&err, SMUX_E_CONNECTION, "edge-b", "connect %s",
		       "127.0.0.1:9");
	smux_error_wrap(&err, SMUX_E_ALL_BACKENDS_DOWN, "media", "gave up");
	smux_error_format(&err, full, sizeof(full));
	full_len = strlen(full);
	assert_true(full_len > 40 && full_len < 200);

	for (size_t size = 0; size <= full_len + 2; size++) {
		memset(buf, '#', sizeof(buf));
		assert_ptr_equal(smux_error_format(&err, buf, size), buf);
		for (size_t i = size; i < sizeof(buf); i++)
			assert_int_equal(buf[i], '#');
		if (size == 0)
			continue;
		assert_true(strlen(buf) < size);
		assert_true(starts_with(full, buf));
		if (size > full_len)
			assert_string_equal(buf, full);
	}
}

static void test_format_long_fields(void **state)
{
	struct smux_error err;
	char longmsg[2 * SMUX_ERROR_MSG_MAX], name[2 * SMUX_ERROR_NAME_MAX];
	char buf[2048];

	(void)state;
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	smux_error_set(&err, SMUX_E_IO, name, "%s", longmsg);
	smux_error_wrap(&err, SMUX_E_WRITE_FANOUT_PARTIAL, name, "%s", longmsg);
	smux_error_format(&err, buf, sizeof(buf));
	/* both names and messages, each at its maximum, plus decoration */
	assert_int_equal(strlen(buf),
			 strlen("STORAGE_MUX.WRITE_FANOUT_PARTIAL [] (cause: "
				"STORAGE.IO_ERROR []: )") +
				 2 + 2 * (size_t)(SMUX_ERROR_NAME_MAX - 1) +
				 2 * (size_t)(SMUX_ERROR_MSG_MAX - 1));
}

static void test_format_null_arguments(void **state)
{
	char buf[8] = "xxxxxxx";

	(void)state;
	assert_ptr_equal(smux_error_format(NULL, buf, sizeof(buf)), buf);
	assert_string_equal(buf, "");
	assert_null(smux_error_format(NULL, NULL, 10));
	buf[0] = 'x';
	smux_error_format(NULL, buf, 0);
	assert_int_equal(buf[0], 'x');
}

/* smux_error_option: the key a configuration error says to fix */
static void test_option_named(void **state)
{
	struct smux_error err;
	char k[8];

	(void)state;
	smux_error_set(&err, SMUX_E_INVALID_OPTIONS, "b",
		       "401 from h: ... not \"ny\" (check region =)");
	assert_true(smux_error_option(&err.e, k, sizeof(k)));
	assert_string_equal(k, "region");
	/* the first key named, cut to fit */
	smux_error_set(&err, SMUX_E_INVALID_OPTIONS, "b",
		       "x (check max_concurrency =, region =)");
	assert_true(smux_error_option(&err.e, k, sizeof(k)));
	assert_string_equal(k, "max_con");
	/* none named, or not in the convention's shape */
	smux_error_set(&err, SMUX_E_INVALID_OPTIONS, "b", "set region");
	assert_false(smux_error_option(&err.e, k, sizeof(k)));
	assert_string_equal(k, "");
	smux_error_set(&err, SMUX_E_INVALID_OPTIONS, "b", "(check region)");
	assert_false(smux_error_option(&err.e, k, sizeof(k)));
	smux_error_set(&err, SMUX_E_INVALID_OPTIONS, "b", "(check  =)");
	assert_false(smux_error_option(&err.e, k, sizeof(k)));
	assert_false(smux_error_option(NULL, k, sizeof(k)));
	assert_false(smux_error_option(&err.e, k, 0));
}

int main(void)
{
	const struct CMUnitTest codes[] = {
		cmocka_unit_test(test_every_code_named_classed_mapped),
		cmocka_unit_test(test_ok_code),
		cmocka_unit_test(test_from_name_round_trips),
		cmocka_unit_test(test_out_of_range_code_is_unknown),
		cmocka_unit_test(test_seed_spellings_and_errnos),
		cmocka_unit_test(test_class_names),
	};
	const struct CMUnitTest set[] = {
		cmocka_unit_test(test_set_every_code),
		cmocka_unit_test(test_set_formats_message),
		cmocka_unit_test(test_setv),
		cmocka_unit_test(test_long_message_and_backend_truncated),
		cmocka_unit_test(test_clear),
	};
	const struct CMUnitTest mapping[] = {
		cmocka_unit_test(test_from_errno_table),
		cmocka_unit_test(test_from_http_table),
		cmocka_unit_test(test_error_class_of_http),
	};
	const struct CMUnitTest wrap[] = {
		cmocka_unit_test(test_wrap_keeps_cause_and_attempts),
		cmocka_unit_test(test_wrap_drops_older_cause),
		cmocka_unit_test(test_wrap_of_no_error_has_no_cause),
	};
	const struct CMUnitTest format[] = {
		cmocka_unit_test(test_format_exact),
		cmocka_unit_test(test_format_truncates_safely),
		cmocka_unit_test(test_format_long_fields),
		cmocka_unit_test(test_format_null_arguments),
		cmocka_unit_test(test_option_named),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("error_codes", codes, NULL, NULL);
	failed += cmocka_run_group_tests_name("error_set", set, NULL, NULL);
	failed += cmocka_run_group_tests_name("error_mapping", mapping, NULL,
					      NULL);
	failed += cmocka_run_group_tests_name("error_wrap", wrap, NULL, NULL);
	failed +=
		cmocka_run_group_tests_name("error_format", format, NULL, NULL);
	return failed ? 1 : 0;
}
