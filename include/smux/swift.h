/* SPDX-License-Identifier: MIT */
/*
 * smux/swift.h - a backend on one container of OpenStack Swift
 * (Rackspace Cloud Files or a self-hosted Swift).
 *
 * Auth: plain Swift tempauth / v1.0 (GET auth_url with X-Auth-User and
 * X-Auth-Key, answered with X-Storage-Url and X-Auth-Token), or identity
 * v2.0 (POST <auth_url>/tokens with RAX-KSKEY:apiKeyCredentials or
 * passwordCredentials; the storage URL is the object-store endpoint of the
 * service catalog for the region, publicURL or internalURL). The token is
 * sent as X-Auth-Token on every call, renewed before it expires and once
 * when a call is answered 401; a renewal the identity service refuses
 * fails the call with CREDENTIAL_EXPIRED. No request is made by
 * smux_swift_new: a service that is down at mount time is a member that is
 * down.
 *
 * Objects: key "a/b/c" is the object "a/b/c" of the container (the
 * container is made on the first write when missing). A directory marker
 * "a/b/" is a 0-byte object "a/b/" of type application/directory. get is
 * GET with Range (and If-Match for a pinned version), head is HEAD (a key
 * with no object answers as a directory when anything is under "key/"),
 * put is one streamed PUT carrying the content MD5 as ETag when the source
 * can be read ahead (a buffer or a file; else the returned ETag is
 * checked), with X-Object-Meta-Mtime (float seconds), -Mode (octal, with
 * the file type) and -Uid/-Gid; copy is PUT with X-Copy-From; rename is
 * copy then DELETE; list is the JSON container listing, paged with marker.
 *
 * Large objects: a put above segment_threshold is a static large object
 * (segments in "<container>_segments" uploaded in order, each with its
 * MD5 as ETag, then the manifest); a failed one deletes its segments. A
 * put over, or a delete of, a large object (an SLO, or a DLO as
 * python-swiftclient writes them) deletes its old segments, with bulk
 * delete when /info offers it. The ETag of an SLO is Swift's: the MD5 of
 * its segments' MD5s.
 *
 * Version tokens (etag): the object's MD5 (hex) as HEAD, GET and the
 * listing report it.
 *
 * Credentials: never in an error, a log line or a stat.
 */
#ifndef SMUX_SWIFT_H
#define SMUX_SWIFT_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

enum smux_swift_auth {
	SMUX_SWIFT_AUTH_V1 = 1, /* tempauth / v1.0 */
	SMUX_SWIFT_AUTH_V2 = 2, /* identity v2.0 (Rackspace) */
};

struct smux_swift_opts {
	/* v1: the full auth URL (".../auth/v1.0"); v2: the identity base
	 * (".../v2.0"), "tokens" is appended */
	const char *auth_url;
	enum smux_swift_auth auth;  /* 0: v1 */
	const char *username;	    /* required */
	const char *key;	    /* v1 key, or v2 API key (RAX-KSKEY) */
	const char *password;	    /* v2 passwordCredentials instead of key */
	const char *tenant;	    /* v2 tenantName; NULL: none */
	const char *region;	    /* v2; NULL: the user's default region */
	bool internal;		    /* v2: internalURL instead of publicURL */
	const char *container;	    /* required, no '/' */
	const char *ca_file;	    /* PEM bundle for TLS; NULL: the system's */
	int64_t connect_timeout_ms; /* 0: 10 s */
	int64_t idle_timeout_ms;    /* 0: 30 s */
	unsigned max_attempts;	    /* per request, 0: 5 */
	/* renew the token this long before it expires; 0: 60 s */
	int64_t reauth_margin_ms;
	/* objects per listing page (1..10000); 0: 1000 (a test knob) */
	unsigned list_page;
	/* own writes and deletes are remembered this long and merged into
	 * listings (eventual consistency); 0: 30 s, negative: never */
	int64_t recent_ms;
	/* a put larger than this goes out as a static large object (SLO):
	 * segments in "<container>_segments", then the manifest; 0: 5 GiB
	 * (Swift's single-object limit), at most 5 GiB */
	uint64_t segment_threshold;
	/* bytes per segment (raised to /info's min_segment_size, and so the
	 * count stays within max_manifest_segments); 0: 1 GiB, at most 5 GiB */
	uint64_t segment_size;
	/* The attribute cache (mode, owner, mtime of each object as the
	 * backend last knew it), so a listing entry whose etag, size and
	 * last_modified match needs no HEAD: an SQLite file (its
	 * directories are made), NULL: kept in memory only. */
	const char *attr_store;
	size_t attr_store_max; /* its bound on entries, 0: 1,000,000 */
	bool attr_store_off;   /* no attribute cache at all */
};

/*
 * Opens the backend. Returns 0 and *@out (one reference), or a negative
 * errno with @err (INVALID_OPTIONS naming the option that is wrong).
 */
int smux_swift_new(const char *name, const struct smux_swift_opts *opts,
		   struct smux_backend **out, struct smux_error *err);

/* Requests made to the identity service (auth or re-auth) by @b, a swift
 * backend; for tests and stats. */
unsigned long smux_swift_auth_count(struct smux_backend *b);

/* Bulk-delete requests sent by @b, and segments it could not delete (an
 * upload that failed, or the old segments of an object replaced or
 * deleted, when their deletion failed too); for tests and stats. */
unsigned long smux_swift_bulk_count(struct smux_backend *b);
unsigned long smux_swift_orphan_count(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_SWIFT_H */
