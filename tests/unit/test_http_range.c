// SPDX-License-Identifier: MIT
/*
 * test_http_range.c - the ranged-GET helpers every network backend uses
 * (backends/http_range.c): the object's size from an answer's headers, and
 * the asked-for bytes of a body whether the server honoured the Range (206:
 * the body is the range) or ignored it (200: the whole object, chunked
 * arbitrarily).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/http_client.h"
#include "smux/backend.h"
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
	char cr[64];
	struct smux__http_resp a;

	/* an honest answer: a 206's Content-Range is the body's */
	snprintf(cr, sizeof(cr), "bytes %llu-%llu/*", (unsigned long long)off,
		 (unsigned long long)(off + n - 1));
	a = resp(status, status == 206 ? cr : "", -1);
	smux_sink_buf(&sink, out, cap);
	smux__http_range_start(&r, &a, off, len);
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

static int no_fetch(void *arg, const char *range, const char *if_match,
		    struct smux_sink *sink, struct smux_error *err)
{
	(void)arg, (void)if_match, (void)sink, (void)err;
	fail_msg("a follow-up for %s with nothing left", range);
	return -EIO;
}

/* Feeds all of @body; returns smux__http_range_check's result (err set),
 * then smux__http_range_rest's when nothing is left to ask for. */
static int answer(long status, const char *range, int64_t length,
		  const char *body, uint64_t off, uint64_t len,
		  struct smux_error *err)
{
	struct smux__http_resp a = resp(status, range, length);
	struct smux__http_range r;
	struct smux_sink sink;
	char out[64];
	size_t n = strlen(body);
	int rc;

	smux_error_clear(err);
	smux_sink_buf(&sink, out, sizeof(out));
	smux__http_range_start(&r, &a, off, len);
	if (n && smux__http_range_write(&r, body, n, &sink) < 0)
		assert_non_null(r.bad); /* only a bad answer is refused */
	rc = smux__http_range_check(&r, true, &a, off, len, "b", "k", err);
	if (rc == 0 && r.next >= r.end) /* nothing left: no follow-up */
		rc = smux__http_range_rest(&r, no_fetch, NULL, &a, &sink, "b",
					   "k", err);
	return rc;
}

/* What came is the range asked for, whole, or an error: a 206 for another
 * range (its body read as the asked one made the file's second MiB a copy
 * of its first), one covering less, and a body cut short (a connection
 * closed early without Content-Length: libcurl says success) were handed
 * on as the content. */
static void test_range_checked(void **state)
{
	struct smux_error err;

	(void)state;
	/* honest answers */
	assert_int_equal(answer(206, "bytes 5-9/20", 5, "56789", 5, 5, &err),
			 0);
	assert_int_equal(
		answer(206, "bytes 15-19/20", 5, "fghij", 15, 10, &err),
		0); /* a range past the end: what there is */
	assert_int_equal(
		answer(200, "", 20, "0123456789abcdefghij", 18, 10, &err), 0);
	assert_int_equal(answer(200, "", 0, "", 0, SMUX_LEN_ALL, &err), 0);
	/* no length said: nothing to hold it to */
	assert_int_equal(answer(200, "", -1, "0123", 0, SMUX_LEN_ALL, &err), 0);
	/* a 206 for another range */
	assert_int_equal(answer(206, "bytes 0-4/20", 5, "01234", 5, 5, &err),
			 -EIO);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	assert_non_null(strstr(err.e.message, "another range"));
	assert_non_null(strstr(err.e.message, "\"k\""));
	/* one covering less than asked, of an object that has more: what
	 * came is kept (the rest is another request's) */
	assert_int_equal(answer(206, "bytes 5-6/20", 2, "56", 5, 5, &err), 0);
	/* without a usable Content-Range */
	assert_int_equal(answer(206, "", 5, "56789", 5, 5, &err), -EIO);
	assert_int_equal(answer(206, "bytes x-9/20", 5, "56789", 5, 5, &err),
			 -EIO);
	/* cut short: fewer body bytes than the answer says */
	assert_int_equal(answer(206, "bytes 5-9/20", -1, "567", 5, 5, &err),
			 -EIO);
	assert_non_null(strstr(err.e.message, "cut short (3 of 5 bytes)"));
	assert_int_equal(
		answer(200, "", 20, "0123456789", 0, SMUX_LEN_ALL, &err), -EIO);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	/* a 206 longer than its Content-Range (a body without a length):
	 * its extra bytes read as the object's next ones, and the rest then
	 * asked for from byte 4, made a 24-byte copy of 20 */
	assert_int_equal(answer(206, "bytes 0-3/20", -1, "01234567", 0,
				SMUX_LEN_ALL, &err),
			 -EIO);
	assert_non_null(strstr(err.e.message, "longer than its Content-Range"));
	/* a LAST that saturates (the rest was asked for from byte 0), or
	 * one past the object's end */
	assert_int_equal(answer(206, "bytes 5-18446744073709551615/20", -1,
				"567", 5, SMUX_LEN_ALL, &err),
			 -EIO);
	assert_int_equal(
		answer(206, "bytes 5-25/20", -1, "5", 5, SMUX_LEN_ALL, &err),
		-EIO);
	assert_non_null(strstr(err.e.message, "past the object's end"));
}

/* A scripted server for smux__http_range_rest: the object is @data (@n
 * bytes, ETag "v1"); each follow-up is answered by @mode. */
struct fake {
	const char *data;
	size_t n;
	const char *mode; /* "cap4", "byte", "page", "drift", "200",
			     "elsewhere", "empty", "weak" */
	struct smux__http_resp resp;
	unsigned calls;
	char last_if_match[64];
};

static int fake_fetch(void *arg, const char *range, const char *if_match,
		      struct smux_sink *sink, struct smux_error *err)
{
	struct fake *f = arg;
	unsigned long long a, b;
	size_t first, last;

	(void)err;
	f->calls++;
	snprintf(f->last_if_match, sizeof(f->last_if_match), "%s",
		 if_match ? if_match : "");
	assert_int_equal(sscanf(range, "bytes=%llu-%llu", &a, &b), 2);
	first = (size_t)a;
	last = (size_t)b < f->n - 1 ? (size_t)b : f->n - 1;
	if (strcmp(f->mode, "byte") == 0)
		last = first;
	else if (strcmp(f->mode, "page") == 0)
		last = last < first + SMUX__HTTP_RANGE_TRICKLE - 1
			       ? last
			       : first + SMUX__HTTP_RANGE_TRICKLE - 1;
	else if (strcmp(f->mode, "empty") != 0 && last > first + 3)
		last = first + 3; /* cap4 and the rest: 4 bytes an answer */
	if (strcmp(f->mode, "elsewhere") == 0)
		first--, last--;
	f->resp = resp(206, "", (int64_t)(last - first + 1));
	snprintf(f->resp.content_range, sizeof(f->resp.content_range),
		 "bytes %zu-%zu/%zu", first, last, f->n);
	snprintf(f->resp.etag, sizeof(f->resp.etag), "%s",
		 strcmp(f->mode, "drift") == 0	? "\"v2\""
		 : strcmp(f->mode, "weak") == 0 ? "W/\"v1\""
						: "\"v1\"");
	if (strcmp(f->mode, "200") == 0) {
		f->resp = resp(200, "", (int64_t)f->n);
		snprintf(f->resp.etag, sizeof(f->resp.etag), "\"v1\"");
		return smux_sink_write(sink, f->data, f->n);
	}
	if (strcmp(f->mode, "empty") == 0)
		return 0;
	return smux_sink_write(sink, f->data + first, last - first + 1);
}

/* Starts a range of [@off, @off + @len) of @f's object with a first
 * answer of its first 4 bytes (etag @etag), then asks for the rest. */
static int rest(struct fake *f, const char *etag, uint64_t off, uint64_t len,
		char *out, size_t cap, size_t *got, struct smux_error *err)
{
	struct smux__http_range r;
	struct smux__http_resp a;
	struct smux_sink sink;
	char cr[64];
	int rc;

	snprintf(cr, sizeof(cr), "bytes %llu-%llu/%zu", (unsigned long long)off,
		 (unsigned long long)off + 3, f->n);
	a = resp(206, cr, 4);
	snprintf(a.etag, sizeof(a.etag), "%s", etag);
	smux_error_clear(err);
	smux_sink_buf(&sink, out, cap);
	smux__http_range_start(&r, &a, off, len);
	assert_null(r.bad);
	assert_int_equal(smux__http_range_write(&r, f->data + off, 4, &sink),
			 0);
	assert_int_equal(
		smux__http_range_check(&r, true, &a, off, len, "b", "k", err),
		0);
	rc = smux__http_range_rest(&r, fake_fetch, f, &f->resp, &sink, "b", "k",
				   err);
	*got = (size_t)sink.written;
	return rc;
}

/* A 206 that covered less than asked: the rest is asked for, from where
 * the bytes so far end, until the range is in (RFC 9110 allows a server
 * to send less; a CDN capping range sizes made every read of a large
 * file fail). */
static void test_rest_read(void **state)
{
	const char *data = "0123456789abcdefghij";
	struct fake f = {.data = data, .n = 20, .mode = "cap4"};
	struct smux_error err;
	char out[64];
	size_t got;

	(void)state;
	assert_int_equal(
		rest(&f, "\"v1\"", 2, 15, out, sizeof(out), &got, &err), 0);
	assert_int_equal(got, 15);
	assert_memory_equal(out, data + 2, 15);
	assert_int_equal(f.calls, 3); /* 4 + 4 + 4 + 3 */
	assert_string_equal(f.last_if_match, "\"v1\"");
	/* to the end of the object, with no ETag: no If-Match */
	f.calls = 0;
	assert_int_equal(
		rest(&f, "", 5, SMUX_LEN_ALL, out, sizeof(out), &got, &err), 0);
	assert_int_equal(got, 15);
	assert_memory_equal(out, data + 5, 15);
	assert_string_equal(f.last_if_match, "");
	/* a weak ETag is never sent in If-Match (it would never match) */
	f.mode = "weak";
	assert_int_equal(
		rest(&f, "W/\"v1\"", 0, 10, out, sizeof(out), &got, &err), 0);
	assert_int_equal(got, 10);
	assert_string_equal(f.last_if_match, "");
	/* one byte an answer: read, up to the cap of follow-ups */
	f.mode = "byte";
	f.calls = 0;
	assert_int_equal(
		rest(&f, "\"v1\"", 0, 20, out, sizeof(out), &got, &err), 0);
	assert_int_equal(got, 20);
	assert_memory_equal(out, data, 20);
	assert_int_equal(f.calls, 16);
}

/* What a follow-up must be: a 206 from where the bytes so far end, of the
 * same version, whole, and not forever. */
static void test_rest_bounded(void **state)
{
	static char big[SMUX__HTTP_RANGE_FOLLOWUPS + 100];
	static char out[sizeof(big)];
	static char page[(SMUX__HTTP_RANGE_FOLLOWUPS + 8) *
			 SMUX__HTTP_RANGE_TRICKLE];
	static char page_out[sizeof(page)];
	struct fake f = {.data = big, .n = sizeof(big), .mode = "byte"};
	struct smux_error err;
	size_t got;

	(void)state;
	memset(big, 'x', sizeof(big));
	/* a server that never stops sending a byte an answer */
	assert_int_equal(rest(&f, "\"v1\"", 0, sizeof(big), out, sizeof(out),
			      &got, &err),
			 -EIO);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	assert_int_equal(f.calls, SMUX__HTTP_RANGE_FOLLOWUPS);
	assert_non_null(strstr(err.e.message, "follow-ups"));
	print_message("  %s\n", err.e.message);
	f.n = sizeof(page);
	/* answers of 4 KiB are no trickle: a long read goes on (a CDN
	 * capping answers at 1 MiB serves a file of many GiB) */
	f.data = page;
	f.mode = "page";
	f.calls = 0;
	memset(page, 'p', sizeof(page));
	assert_int_equal(rest(&f, "\"v1\"", 0, sizeof(page), page_out,
			      sizeof(page_out), &got, &err),
			 0);
	assert_int_equal(got, sizeof(page));
	assert_true(f.calls > SMUX__HTTP_RANGE_FOLLOWUPS);
	f.data = big;
	f.n = 20;
	/* another version: never spliced to the first */
	f.mode = "drift";
	assert_true(rest(&f, "\"v1\"", 0, 20, out, sizeof(out), &got, &err) <
		    0);
	assert_int_equal(err.e.code, SMUX_E_PRECONDITION_FAILED);
	assert_int_equal(got, 4);
	print_message("  %s\n", err.e.message);
	/* a 200 to a follow-up */
	f.mode = "200";
	assert_int_equal(
		rest(&f, "\"v1\"", 0, 20, out, sizeof(out), &got, &err), -EIO);
	assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	assert_int_equal(got, 4);
	/* a 206 starting elsewhere */
	f.mode = "elsewhere";
	assert_int_equal(
		rest(&f, "\"v1\"", 0, 20, out, sizeof(out), &got, &err), -EIO);
	assert_non_null(strstr(err.e.message, "another range"));
	/* a 206 that brings nothing */
	f.mode = "empty";
	assert_int_equal(
		rest(&f, "\"v1\"", 0, 20, out, sizeof(out), &got, &err), -EIO);
	assert_non_null(strstr(err.e.message, "cut short"));
	print_message("  %s\n", err.e.message);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_size),
		cmocka_unit_test(test_range_ignored_and_honoured),
		cmocka_unit_test(test_range_checked),
		cmocka_unit_test(test_rest_read),
		cmocka_unit_test(test_rest_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
