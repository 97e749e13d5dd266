// SPDX-License-Identifier: MIT
/*
 * http_range.c - the body of a ranged GET, the same for every network
 * backend (http, s3, swift, bunny): the object's size from the answer's
 * headers, the bytes the caller asked for when a server ignored the
 * Range and sent the whole object (200), and the check that what came is
 * the range asked for, whole (a 206 for another range, or cut short, is
 * an error: handed on, a short body read as the file's content or a
 * page of zeros).
 *
 * Owns nothing: the state lives in the backend's get sink.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "backends/http_client.h"
#include "smux/io.h"

bool smux__http_answer_size(const struct smux__http_resp *r, uint64_t *size)
{
	const char *slash = strchr(r->content_range, '/');
	char *end;

	if (slash && slash[1] != '*') {
		*size = strtoull(slash + 1, &end, 10);
		return end != slash + 1 && *end == '\0';
	}
	if (r->status == 200 && r->content_length >= 0) {
		*size = (uint64_t)r->content_length;
		return true;
	}
	return false;
}

/* "bytes FIRST-LAST/..." of a 206: false when it does not say. */
static bool content_range(const char *v, uint64_t *first, uint64_t *last)
{
	char *end;

	if (strncmp(v, "bytes ", 6) != 0 || v[6] < '0' || v[6] > '9')
		return false;
	*first = strtoull(v + 6, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return false;
	*last = strtoull(end + 1, &end, 10);
	return *end == '/' && *last >= *first;
}

/* The bytes of [@off, @off + @len) an object of @size holds. */
static uint64_t within(uint64_t size, uint64_t off, uint64_t len)
{
	if (off >= size)
		return 0;
	return len < size - off ? len : size - off;
}

void smux__http_range_start(struct smux__http_range *r,
			    const struct smux__http_resp *resp, uint64_t off,
			    uint64_t len)
{
	uint64_t size, first, last;
	bool sized = smux__http_answer_size(resp, &size);

	memset(r, 0, sizeof(*r));
	r->room = len;
	r->expect = -1;
	if (resp->status != 206) {
		/* the whole object: what is asked is in it, if it is known
		 * how long it is */
		r->skip = off;
		if (sized)
			r->expect = (int64_t)within(size, off, len);
		return;
	}
	if (!content_range(resp->content_range, &first, &last)) {
		r->bad = "a 206 without a usable Content-Range";
		return;
	}
	r->got_from = first;
	r->got_to = last;
	if (first != off) {
		r->bad = "a 206 for another range";
		return;
	}
	/* the range asked for, as far as the object goes; a server that
	 * sends less of it is not read as if that were all */
	r->expect = (int64_t)(sized ? within(size, off, len)
				    : within(last + 1, off, len));
	if (last - first + 1 < (uint64_t)r->expect)
		r->bad = "a 206 covering less than asked";
}

int smux__http_range_write(struct smux__http_range *r, const void *data,
			   size_t len, struct smux_sink *out)
{
	const char *p = data;
	int rc;

	if (r->bad)
		return -EPROTO;
	if (r->skip) {
		size_t k = len < r->skip ? len : (size_t)r->skip;

		r->skip -= k;
		p += k;
		len -= k;
	}
	if (len > r->room)
		len = (size_t)r->room;
	r->room -= len;
	rc = len ? smux_sink_write(out, p, len) : 0;
	if (rc == 0)
		r->delivered += len;
	return rc;
}

int smux__http_range_check(struct smux__http_range *r, bool started,
			   const struct smux__http_resp *resp, uint64_t off,
			   uint64_t len, const char *backend, const char *key,
			   struct smux_error *err)
{
	if (!started)
		smux__http_range_start(r, resp, off, len);
	if (r->bad)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				      "get \"%s\": %s (bytes %" PRIu64
				      "-%" PRIu64 " for a range from %" PRIu64
				      ")",
				      key, r->bad, r->got_from, r->got_to, off);
	if (r->expect >= 0 && r->delivered < (uint64_t)r->expect)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				      "get \"%s\": the answer was cut short "
				      "(%" PRIu64 " of %" PRId64 " bytes)",
				      key, r->delivered, r->expect);
	return 0;
}
