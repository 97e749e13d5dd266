// SPDX-License-Identifier: MIT
/*
 * test_http_range.c - the ranged-GET helpers every network backend uses
 * (backends/http_range.c): the object's size from an answer's headers, and
 * the asked-for bytes of a body whether the server honoured the Range (206:
 * the body is the range) or ignored it (200: the whole object, chunked
 * arbitrarily).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/http_client.h"
#include "smux/io.h"

static struct smux__http_resp resp(long status, const char *range,
				   int64_t length)
{
	struct smux__http_resp r;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.content_length = length;
	snprintf(r.content_range, sizeof(r.content_range), "%s", range);
	return r;
}

static void test_answer_size(void **state)
{
	struct smux__http_resp r;
	uint64_t size = 7;

	(void)state;
	r = resp(206, "bytes 10-19/12345", 10);
	assert_true(smux__http_answer_size(&r, &size));
	assert_int_equal(size, 12345);
	r = resp(200, "", 42);
	assert_true(smux__http_answer_size(&r, &size));
	assert_int_equal(size, 42);
	r = resp(200, "", 0); /* an empty object */
	assert_true(smux__http_answer_size(&r, &size));
	assert_int_equal(size, 0);
	/* what does not say the total */
	r = resp(206, "bytes 10-19/*", 10);
	assert_false(smux__http_answer_size(&r, &size));
	r = resp(206, "", 10); /* 10 is the range's length, not the size */
	assert_false(smux__http_answer_size(&r, &size));
	r = resp(200, "", -1);
	assert_false(smux__http_answer_size(&r, &size));
	r = resp(206, "bytes 0-1/12x", 2);
	assert_false(smux__http_answer_size(&r, &size));
	r = resp(206, "bytes 0-1/", 2);
	assert_false(smux__http_answer_size(&r, &size));
}

/* Feeds @body in pieces of @step bytes; returns what reached the sink. */
static size_t feed(long status, const char *body, size_t step, uint64_t off,
		   uint64_t len, char *out, size_t cap)
{
	struct smux__http_range r;
	struct smux_sink sink;
	size_t n = strlen(body);

	smux_sink_buf(&sink, out, cap);
	smux__http_range_start(&r, status, off, len);
	for (size_t i = 0; i < n; i += step)
		assert_int_equal(smux__http_range_write(
					 &r, body + i,
					 n - i < step ? n - i : step, &sink),
				 0);
	return (size_t)sink.written;
}

static void test_range_ignored_and_honoured(void **state)
{
	const char *whole = "0123456789abcdefghij";
	char out[64];
	size_t n;

	(void)state;
	/* 200 to "bytes=5-9": skip 5, deliver 5, whatever the chunking */
	for (size_t step = 1; step <= 21; step++) {
		memset(out, 0, sizeof(out));
		n = feed(200, whole, step, 5, 5, out, sizeof(out));
		assert_int_equal(n, 5);
		assert_memory_equal(out, "56789", 5);
	}
	/* 206: the body is the range; nothing skipped, bounded by len */
	memset(out, 0, sizeof(out));
	n = feed(206, "56789XX", 3, 5, 5, out, sizeof(out));
	assert_int_equal(n, 5);
	assert_memory_equal(out, "56789", 5);
	/* a range past what came: only what there is */
	memset(out, 0, sizeof(out));
	n = feed(200, whole, 4, 18, 10, out, sizeof(out));
	assert_int_equal(n, 2);
	assert_memory_equal(out, "ij", 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_size),
		cmocka_unit_test(test_range_ignored_and_honoured),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
