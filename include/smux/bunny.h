/* SPDX-License-Identifier: MIT */
/*
 * smux/bunny.h - a backend on one BunnyCDN Storage zone (the Edge Storage
 * HTTP API: https://docs.bunny.net/storage/http).
 *
 * Key "a/b/c" is the object <endpoint>/<zone>/a/b/c (percent-encoded, '/'
 * kept). Directories are real on Bunny: a put makes the missing ones
 * above a key, "a/" (a marker key) is PUT a/ (mkdir), and a directory
 * stays after its last file goes, as on a file system.
 *
 * Requests: get is DESCRIBE (size, checksum, the version check) then GET
 * with Range (a server that answers 200 instead is read from the offset
 * and the transfer stopped once the range is in); head is DESCRIBE; list
 * is GET dir/ (the trailing slash asks for the JSON listing, parsed with
 * jansson), a flat listing walks the subdirectories; put is one PUT with
 * the body's SHA-256 as the uppercase hex Checksum header (hashed from the
 * source before sending; a 400 that is not a directory in the way is sent
 * once more, then an error); del of an object is DELETE without a slash
 * after a DESCRIBE showed it is not a directory (DELETE dir/ is
 * recursive on Bunny), del of "a/" refuses a non-empty directory
 * (NOT_EMPTY) and sends DELETE a/ only for an empty one. There is no copy
 * or rename on the server: the dispatch wrappers' fallback (get into a
 * temporary file, put, delete) does them.
 *
 * Version tokens (etag): the object's SHA-256 (Bunny's Checksum field),
 * else size and LastChanged. mtime is LastChanged, the upload time (read
 * as UTC: Bunny's timestamps carry no zone); Bunny keeps no mode, owner or
 * settable mtime.
 *
 * Throttling: every request holds one of max_concurrency slots of the
 * instance (one zone) for its whole run, retries included; 429 and 5xx
 * are retried with backoff, honouring Retry-After.
 *
 * Credentials: the zone password goes out as the AccessKey header only;
 * never in an error, a log line or a stat. A 401 is a configuration error
 * (INVALID_OPTIONS) naming the zone and the region: Bunny answers 401 to a
 * wrong password and to a zone asked at another region's host alike.
 */
#ifndef SMUX_BUNNY_H
#define SMUX_BUNNY_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest zone password accepted (bytes). */
#define SMUX_BUNNY_KEY_MAX 256

struct smux_bunny_opts {
	const char *zone;	/* storage zone name (required) */
	const char *access_key; /* the zone's password (required; copied) */
	/* primary region: "de" (or NULL/""; Falkenstein, storage.bunnycdn.com),
	 * "uk", "ny", "la", "sg", "se", "br", "jh", "syd" */
	const char *region;
	/* base URL overriding the region's host (tests, a proxy):
	 * http(s)://host[:port][/path], no credentials, no query */
	const char *endpoint;
	const char *ca_file;	    /* PEM bundle; NULL: the system's */
	unsigned max_concurrency;   /* requests in flight at once, 0: 4 */
	int64_t connect_timeout_ms; /* 0: 10 s */
	int64_t idle_timeout_ms;    /* 0: 30 s */
	unsigned max_attempts;	    /* per request, 0: 8 (429 bursts) */
	int64_t backoff_base_ms;    /* 0: 100 ms */
	int64_t backoff_cap_ms;	    /* 0: 5 s; also caps Retry-After */
};

/*
 * Opens the backend (no request is made). 0 and *@out (one reference),
 * or a negative errno with @err (INVALID_OPTIONS naming the bad option).
 */
int smux_bunny_new(const char *name, const struct smux_bunny_opts *opts,
		   struct smux_backend **out, struct smux_error *err);

/*
 * The host of a region code ("de" or "" -> "storage.bunnycdn.com", "uk" ->
 * "uk.storage.bunnycdn.com", ...), NULL for an unknown code.
 */
const char *smux_bunny_region_host(const char *region);

/*
 * Reads a zone password from @path (one line; a trailing newline is
 * dropped; at most SMUX_BUNNY_KEY_MAX bytes, no control characters). *@key
 * is a heap string the caller wipes and frees. 0, or a negative errno
 * with @err naming the file, never its content.
 */
int smux_bunny_read_key(const char *path, char **key, struct smux_error *err);

/* Renames of @b (a bunny backend; 0 otherwise) that uploaded the caller's
 * verified local copy (smux_ctx.local) instead of reading the object. */
unsigned long smux_bunny_local_renames(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_BUNNY_H */
