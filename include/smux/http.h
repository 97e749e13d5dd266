/* SPDX-License-Identifier: MIT */
/*
 * smux/http.h - a backend on an HTTP server: WebDAV (read-write) or a plain
 * static HTTP mirror (read-only).
 *
 * Key "a/b/c" is the resource <url>a/b/c (each byte outside RFC 3986's
 * unreserved set percent-encoded, '/' kept); directories are WebDAV
 * collections, so a key "a/b/" is the collection itself (its marker) and
 * a put of "a/b/c" makes the missing collections above it (MKCOL).
 *
 * WebDAV (webdav = true): get is GET with Range, head and list are
 * PROPFIND (Depth 0 and 1, parsed with expat), put is one streamed PUT
 * (atomic on nginx and Apache, which write a temp file and rename it),
 * del is DELETE (a collection only when empty: NOT_EMPTY otherwise, never
 * WebDAV's recursive delete), copy is COPY and rename is MOVE, both with
 * Overwrite: T. Plain HTTP (webdav = false): get and head (GET, HEAD);
 * list and every write answer NOT_SUPPORTED.
 *
 * Version tokens (etag): size and mtime of the resource as the server
 * reports them (getcontentlength/getlastmodified, Content-Length/
 * Last-Modified), the same from head, list and get on every server (nginx's
 * PROPFIND gives no getetag). A get pinned with if_match checks the
 * version of the answer before one byte reaches the sink. mtime has the
 * server's resolution (1 s); a put's mtime is sent as the Date header,
 * which nginx keeps as the file's mtime and Apache ignores.
 *
 * Credentials: HTTP Basic, given to libcurl only; never in an error, a
 * log line or a stat. TLS is verified (ca_file overrides the system's
 * bundle); proxies come from the usual environment variables.
 */
#ifndef SMUX_HTTP_H
#define SMUX_HTTP_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct smux_http_opts {
	const char *url;	    /* http:// or https://, no user:password@;
				 a '/' is added when missing */
	bool webdav;		    /* read-write WebDAV; false: read-only */
	const char *username;	    /* Basic auth; NULL: none */
	const char *password;	    /* with username */
	const char *ca_file;	    /* PEM bundle for TLS; NULL: the system's */
	int64_t connect_timeout_ms; /* 0: 10 s */
	int64_t idle_timeout_ms;    /* 0: 30 s */
	unsigned max_attempts;	    /* per request, 0: 5 */
};

/*
 * Opens the backend (no request is made: a server that is down at mount
 * time is a member that is down). Returns 0 and *@out (one reference), or
 * a negative errno with @err (INVALID_OPTIONS for a bad url).
 */
int smux_http_new(const char *name, const struct smux_http_opts *opts,
		  struct smux_backend **out, struct smux_error *err);

/*
 * Reads Basic credentials from a file holding one line "user:password"
 * (the password is everything after the first ':'; a trailing newline is
 * dropped). *@user and *@pass are heap strings the caller frees (and
 * should wipe). 0, or a negative errno with @err naming the file, never
 * its content.
 */
int smux_http_read_credentials(const char *path, char **user, char **pass,
			       struct smux_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_HTTP_H */
