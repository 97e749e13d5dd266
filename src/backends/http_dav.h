/* SPDX-License-Identifier: MIT */
/*
 * backends/http_dav.h - what the http backend's modules share: http_dav.c
 * (the instance and the operations) and http_dav_xml.c (the PROPFIND
 * multistatus parser). Not a public header.
 *
 * The parser is fed the response body as it arrives (a sink callback), so
 * a listing is never buffered whole; it keeps one entry per <response>
 * with a 2xx <propstat>. Every byte is hostile: names, text and the number
 * of entries are bounded, hrefs are percent-decoded and must lie inside
 * the collection asked for, and a malformed document is an error, never a
 * partial listing taken for a whole one.
 */
#ifndef SMUX_BACKENDS_HTTP_DAV_H
#define SMUX_BACKENDS_HTTP_DAV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest href or text value the parser keeps. */
#define SMUX__DAV_TEXT_MAX 8192
/* Most entries one PROPFIND answer may hold. */
#define SMUX__DAV_ENTRIES_MAX 1000000u

/* One member of a collection (or the collection itself). */
struct smux__dav_entry {
	char *name;	  /* decoded child name, one segment; NULL for self */
	bool is_dir;	  /* resourcetype holds collection */
	bool has_size;	  /* getcontentlength was given */
	uint64_t size;	  /* getcontentlength */
	int64_t mtime_ns; /* getlastmodified, 0 when absent */
	char etag[128];	  /* getetag, "" when absent */
	/* smuxfs's own dead properties (urn:x-smuxfs:), where the server
	 * keeps them (Apache; PROPPATCH): the exact mtime and the mode */
	bool has_smtime, has_smode;
	int64_t smtime_ns;
	uint32_t smode;
};

/* The namespace of smuxfs's dead properties. */
#define SMUX__DAV_NS "urn:x-smuxfs:"

struct smux__dav_parser;

/*
 * A parser for the answer to a PROPFIND on the collection whose decoded
 * path (no scheme/host, percent-decoded, ending in '/') is @coll_path.
 * 0 or -ENOMEM.
 */
int smux__dav_parser_new(const char *coll_path, struct smux__dav_parser **out);
/* NULL is a no-op. */
void smux__dav_parser_free(struct smux__dav_parser *p);
/* Forgets everything parsed (a retried request). 0 or -ENOMEM. */
int smux__dav_parser_reset(struct smux__dav_parser *p);
/*
 * Feeds @len bytes; @final after the last. 0, or -EBADMSG (not a
 * well-formed multistatus, an href outside the collection, a bad number),
 * -E2BIG (too many entries or a value too long), -ENOMEM. After an error
 * every later call fails the same way.
 */
int smux__dav_parser_feed(struct smux__dav_parser *p, const void *buf,
			  size_t len, bool final);
/* A short reason for the last error, for messages. */
const char *smux__dav_parser_error(const struct smux__dav_parser *p);

/* The children found (self excluded), in document order. */
size_t smux__dav_parser_count(const struct smux__dav_parser *p);
/* The children left out: names no key can have ("a%2Fb", ".", ".."). */
size_t smux__dav_parser_skipped(const struct smux__dav_parser *p);
const struct smux__dav_entry *
smux__dav_parser_entry(const struct smux__dav_parser *p, size_t i);
/* The collection's own entry (Depth 0 answers hold only this), or NULL. */
const struct smux__dav_entry *
smux__dav_parser_self(const struct smux__dav_parser *p);

/*
 * The outcome a 207 Multi-Status answer to a change (DELETE, MOVE, COPY)
 * reports in its body of @len bytes: 0 when every <response> and
 * <propstat> status is 2xx, else the first status that is not (423
 * Locked, 403...: the change did not happen there, whatever the 207
 * says); -EBADMSG when the body is no DAV:multistatus (a DOCTYPE
 * refused), -ENOMEM.
 */
long smux__dav_multistatus_failure(const char *body, size_t len);

#endif /* SMUX_BACKENDS_HTTP_DAV_H */
