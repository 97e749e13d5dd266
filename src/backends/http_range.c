// SPDX-License-Identifier: MIT
/*
 * http_range.c - the body of a ranged GET, the same for every network
 * backend (http, s3, swift, bunny): the object's size from the answer's
 * headers, and the bytes the caller asked for when a server ignored the
 * Range and sent the whole object (200).
 *
 * Owns nothing: the state lives in the backend's get sink.
 */
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

void smux__http_range_start(struct smux__http_range *r, long status,
			    uint64_t off, uint64_t len)
{
	r->skip = status == 200 ? off : 0;
	r->room = len;
}

int smux__http_range_write(struct smux__http_range *r, const void *data,
			   size_t len, struct smux_sink *out)
{
	const char *p = data;

	if (r->skip) {
		size_t k = len < r->skip ? len : (size_t)r->skip;

		r->skip -= k;
		p += k;
		len -= k;
	}
	if (len > r->room)
		len = (size_t)r->room;
	r->room -= len;
	return len ? smux_sink_write(out, p, len) : 0;
}
