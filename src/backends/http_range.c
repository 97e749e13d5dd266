// SPDX-License-Identifier: MIT
/*
 * http_range.c - the body of a ranged GET, the same for every network
 * backend (http, s3, swift, bunny): the object's size from the answer's
 * headers, the bytes the caller asked for when a server ignored the
 * Range and sent the whole object (200), and the check that what came is
 * the range asked for, whole (a 206 for another range, or cut short, is
 * an error: handed on, a short body read as the file's content or a
 * page of zeros). A 206 that covers less than asked (RFC 9110 §15.3.7
 * allows it; CDNs and object stores cap range sizes) is kept, and the
 * rest is asked for in follow-ups of the same version.
 *
 * Owns nothing: the state lives in the backend's get sink.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
	/* (a LAST past 2^64 - 2 saturates: no range of any object) */
	return *end == '/' && *last >= *first && *last < UINT64_MAX;
}

/* The bytes of [@off, @off + @len) an object of @size holds. */
static uint64_t within(uint64_t size, uint64_t off, uint64_t len)
{
	if (off >= size)
		return 0;
	return len < size - off ? len : size - off;
}

/*
 * The 206 @resp as the answer for bytes from @at (of an object of @size
 * when @sized): its Content-Range usable, starting at @at and within the
 * object. Sets what it covers (got_from, got_to, *@last) and the body it
 * may bring (body_left); false with @r->bad set when it is not so.
 */
static bool partial_from(struct smux__http_range *r,
			 const struct smux__http_resp *resp, uint64_t at,
			 bool sized, uint64_t size, uint64_t *last)
{
	uint64_t first;

	if (!content_range(resp->content_range, &first, last)) {
		r->bad = "a 206 without a usable Content-Range";
		return false;
	}
	r->got_from = first;
	r->got_to = *last;
	if (first != at) {
		r->bad = "a 206 for another range";
		return false;
	}
	if (sized && *last >= size) {
		r->bad = "a 206 past the object's end";
		return false;
	}
	r->body_left = *last - first + 1;
	return true;
}

void smux__http_range_start(struct smux__http_range *r,
			    const struct smux__http_resp *resp, uint64_t off,
			    uint64_t len)
{
	uint64_t size = 0, last;
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
	if (!partial_from(r, resp, off, sized, size, &last))
		return;
	r->partial = true;
	/* the range asked for, as far as the object goes; what this answer
	 * covers of it must come, the rest is asked for again */
	r->end = off +
		 (sized ? within(size, off, len) : within(last + 1, off, len));
	r->next = last + 1 < r->end ? last + 1 : r->end;
	r->expect = (int64_t)(r->next - off);
	snprintf(r->etag, sizeof(r->etag), "%s", resp->etag);
	snprintf(r->last_modified, sizeof(r->last_modified), "%s",
		 resp->last_modified);
	r->size = size;
	r->sized = sized;
}

/* A follow-up's answer @resp, for the rest from @at: a 206 from @at, of
 * the first answer's version. Marks @r bad when it is not. */
static void range_follow(struct smux__http_range *r,
			 const struct smux__http_resp *resp, uint64_t at)
{
	uint64_t size = 0, last;
	bool sized = smux__http_answer_size(resp, &size);

	r->got_from = r->got_to = 0;
	if (resp->status != 206) {
		r->bad = "an answer that is no 206 to a follow-up of a 206";
		return;
	}
	if (!partial_from(r, resp, at, sized, size, &last))
		return;
	/* another version than the first answer's: its bytes spliced to
	 * those would be neither */
	if ((r->etag[0] && strcmp(r->etag, resp->etag) != 0) ||
	    (r->last_modified[0] &&
	     strcmp(r->last_modified, resp->last_modified) != 0) ||
	    (r->sized && sized && size != r->size)) {
		r->bad = "another version of the object in a follow-up";
		r->stale = true;
		return;
	}
	r->next = last + 1 < r->end ? last + 1 : r->end;
	r->expect = (int64_t)(r->delivered + (r->next - at));
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
	/* a 206 holds what its Content-Range says, no more: bytes past it
	 * would be read as the object's next ones */
	if (r->partial && len > r->body_left) {
		r->bad = "a 206 longer than its Content-Range";
		return -EPROTO;
	}
	if (r->partial)
		r->body_left -= len;
	if (len > r->room)
		len = (size_t)r->room;
	r->room -= len;
	rc = len ? smux_sink_write(out, p, len) : 0;
	if (rc == 0)
		r->delivered += len;
	return rc;
}

/* BAD_RESPONSE when the answer under way delivered less than it said. */
static int cut_short(const struct smux__http_range *r, const char *backend,
		     const char *key, struct smux_error *err)
{
	if (r->expect >= 0 && r->delivered < (uint64_t)r->expect)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				      "get \"%s\": the answer was cut short "
				      "(%" PRIu64 " of %" PRId64 " bytes)",
				      key, r->delivered, r->expect);
	return 0;
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
	return cut_short(r, backend, key, err);
}

void smux__http_range_hdrs(struct smux__http_range_hdrs *h, const char *range,
			   const char *if_match)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->range, sizeof(h->range), "Range: %s", range);
	h->list[0] = h->range;
	if (if_match) {
		snprintf(h->if_match, sizeof(h->if_match), "If-Match: %s",
			 if_match);
		h->list[1] = h->if_match;
	}
}

/* The sink of one follow-up: its answer is checked at its first byte. */
struct range_follow_sink {
	struct smux__http_range *r;
	const struct smux__http_resp *resp;
	struct smux_sink *out;
	uint64_t at; /* where the follow-up starts */
	bool started;
};

static int follow_write(void *arg, const void *data, size_t len)
{
	struct range_follow_sink *f = arg;

	if (!f->started) {
		f->started = true;
		range_follow(f->r, f->resp, f->at);
	}
	return smux__http_range_write(f->r, data, len, f->out);
}

int smux__http_range_rest(struct smux__http_range *r,
			  smux__http_range_fetch_fn fetch, void *arg,
			  const struct smux__http_resp *resp,
			  struct smux_sink *out, const char *backend,
			  const char *key, struct smux_error *err)
{
	struct range_follow_sink f;
	struct smux_sink wrap;
	char range[64], im[SMUX__HTTP_HDR_MAX + 2];
	const char *if_match = NULL;
	int rc;

	/* a weak ETag never matches If-Match (RFC 9110 §13.1.1), nor one
	 * the answer's header buffer cut (every follow-up would be a 412); a
	 * bare one (Swift's) is quoted. The answers' ETags are compared
	 * anyway (range_follow) */
	if (r->etag[0] && strncmp(r->etag, "W/", 2) != 0 &&
	    strlen(r->etag) < sizeof(r->etag) - 1) {
		snprintf(im, sizeof(im), r->etag[0] == '"' ? "%s" : "\"%s\"",
			 r->etag);
		if_match = im;
	}
	while (r->next < r->end) {
		/* the rest starts where the bytes so far end, so the answer
		 * before must be whole (cut short, its gap would be lost) */
		rc = cut_short(r, backend, key, err);
		if (rc)
			return rc;
		if (r->trickles >= SMUX__HTTP_RANGE_FOLLOWUPS)
			return smux_error_set(
				err, SMUX_E_BAD_RESPONSE, backend,
				"get \"%s\": still %" PRIu64
				" bytes short after %u follow-ups of a 206 "
				"that covered less than asked (%u of them "
				"under %d bytes)",
				key, r->end - r->next, r->followups,
				r->trickles, SMUX__HTTP_RANGE_TRICKLE);
		r->followups++;
		f = (struct range_follow_sink){
			.r = r, .resp = resp, .out = out, .at = r->next};
		snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64,
			 f.at, r->end - 1);
		/* no rewind: the bytes before this follow-up stay */
		smux_sink_cb(&wrap, follow_write, NULL, &f);
		rc = fetch(arg, range, if_match, &wrap, err);
		if (!r->bad && !f.started && rc == 0)
			range_follow(r, resp, f.at); /* an empty answer */
		if (r->bad)
			return smux_error_set(
				err,
				r->stale ? SMUX_E_PRECONDITION_FAILED
					 : SMUX_E_BAD_RESPONSE,
				backend,
				"get \"%s\": %s (bytes %" PRIu64 "-%" PRIu64
				" for the rest from %" PRIu64 ")",
				key, r->bad, r->got_from, r->got_to, f.at);
		if (rc < 0 && out->error) /* the caller's sink failed */
			return smux_error_make_local(err, out->error);
		if (rc < 0)
			return rc;
		if (r->next <= f.at) /* no progress: never a loop */
			return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
					      "get \"%s\": a follow-up "
					      "brought nothing",
					      key);
		if (r->next - f.at < SMUX__HTTP_RANGE_TRICKLE &&
		    r->next < r->end)
			r->trickles++;
	}
	return cut_short(r, backend, key, err);
}
