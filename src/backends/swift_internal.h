/* SPDX-License-Identifier: MIT */
/*
 * backends/swift_internal.h - what the files of the swift backend share:
 * swift.c (the ops table and object calls), swift_auth.c (tempauth and
 * identity v2 tokens), swift_list.c (JSON listings and the memory of own
 * recent writes). Not a public header.
 */
#ifndef SMUX_BACKENDS_SWIFT_INTERNAL_H
#define SMUX_BACKENDS_SWIFT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backends/http_client.h"
#include "core/attrstore.h"
#include "core/keynotes.h"
#include "smux/swift.h"

/* Longest token or storage URL accepted from an auth answer (bytes). */
#define SWIFT_AUTH_VALUE_MAX 4096
/* Longest identity answer read (bytes): a catalog is a few KiB. */
#define SWIFT_AUTH_BODY_MAX (1u << 20)

/* The token and storage URL in use, renewed under @mu. */
struct swift_auth {
	pthread_mutex_t mu;
	/* configuration (copies; secrets wiped on free) */
	enum smux_swift_auth kind;
	char *auth_url;
	char *username, *key, *password, *tenant, *region;
	bool internal;
	int64_t margin_ns;
	/* state, under mu */
	char *token;	     /* NULL: none (authenticate first) */
	char *storage_url;   /* no trailing '/' */
	int64_t expires_ns;  /* CLOCK_REALTIME; 0: unknown (never renew
				before a 401) */
	uint64_t generation; /* bumped by each new token */
	atomic_ulong count;  /* auth requests made */
};

/* One recently written or deleted key (swift_list.c). */
struct swift_recent {
	char *key;
	bool deleted;
	int64_t at_ns; /* CLOCK_MONOTONIC */
	struct smux_info info;
};

/* What the cluster's /info says about large objects and bulk delete
 * (swift_slo.c); read once, on the first large put or bulk delete. */
struct swift_limits {
	bool known;	       /* /info was read, or has none (404) */
	bool slo, bulk;	       /* offered */
	uint64_t max_segments; /* slo.max_manifest_segments; 0: unsaid */
	uint64_t min_segment;  /* slo.min_segment_size */
	uint64_t max_manifest; /* slo.max_manifest_size (bytes) */
	uint64_t max_deletes;  /* bulk_delete.max_deletes_per_request */
	/* the longest escaped "/container/object" line a bulk delete takes:
	 * the longest names (swift.max_object_name_length and
	 * max_container_name_length) + 2, bulk.py's max_path_length. A
	 * longer line makes it refuse the whole request (400 "Invalid File
	 * Name") */
	uint64_t max_line;
};

/* What a key was last seen as (swift_absent.c). */
enum swift_known {
	SWIFT_KNOWN_NONE,
	SWIFT_KNOWN_ABSENT, /* a HEAD's 404, an own DELETE */
	SWIFT_KNOWN_PLAIN,  /* an object that is no large-object manifest */
};

/* Slots of the absent memory, and how long a note is a hint. */
#define SWIFT_ABSENT_SLOTS 1024
#define SWIFT_ABSENT_NS	   (10LL * 1000000000LL)

/* Swift's defaults when /info does not say (slo.py, bulk.py). */
#define SWIFT_SLO_MAX_SEGMENTS	 1000
#define SWIFT_SLO_MAX_MANIFEST	 (8ULL << 20)
#define SWIFT_BULK_MAX_DELETES	 10000
#define SWIFT_MAX_OBJECT_NAME	 1024
#define SWIFT_MAX_CONTAINER_NAME 256
/* The largest single object Swift stores (constraints.py MAX_FILE_SIZE). */
#define SWIFT_MAX_OBJECT 5368709122ULL
/* Defaults of segment_threshold and segment_size. */
#define SWIFT_SEG_THRESHOLD_DEFAULT (5ULL << 30)
#define SWIFT_SEG_SIZE_DEFAULT	    (1ULL << 30)
/* Longest bulk-delete or manifest answer read (bytes). */
#define SWIFT_BULK_ANSWER_MAX (4u << 20)

struct swiftb {
	struct smux_backend base; /* first: downcast by swiftb_from */
	struct smux__http *http;
	struct swift_auth auth;
	char *container;     /* as configured */
	char *container_esc; /* percent-encoded */
	unsigned list_page;
	atomic_bool container_ok; /* made or seen once */
	/* own recent writes/deletes, for listings */
	pthread_mutex_t recent_mu;
	struct swift_recent *recent;
	size_t n_recent, cap_recent;
	int64_t recent_ns; /* how long one is kept; <= 0: never */
	/* large objects (swift_slo.c) and bulk delete (swift_bulk.c) */
	uint64_t seg_threshold; /* larger puts go out as an SLO */
	uint64_t seg_size;
	char *seg_container;	 /* "<container>_segments" */
	char *seg_container_esc; /* percent-encoded */
	atomic_bool seg_container_ok;
	atomic_ulong seg_seq; /* makes segment names of one process unique */
	pthread_mutex_t limits_mu;
	struct swift_limits limits; /* under limits_mu */
	atomic_ulong n_bulk;	    /* bulk-delete requests sent */
	atomic_ulong n_orphans;	    /* segments that could not be deleted */
	/* keys last seen absent or plain (swift_absent.c, core/keynotes.h:
	 * an enum swift_known each): which put or delete to send first */
	struct smux__keynotes *known; /* NULL: no hints */
	/* what was last known of each object's attributes, so a listing
	 * needs no HEAD per entry (core/attrstore.c); NULL: off */
	struct smux__attrstore *attrs;
};

/* swift_auth.c */
int swift__auth_init(struct swift_auth *a, const char *name,
		     const struct smux_swift_opts *o, struct smux_error *err);
void swift__auth_release(struct swift_auth *a);
/*
 * The token and storage URL to use now (authenticating when there is none
 * or it expires within the margin): heap copies in *@token and *@url (the
 * caller frees them; wipes the token) and the token's generation.
 */
int swift__auth_get(struct swiftb *s, const struct smux_ctx *ctx, char **token,
		    char **url, uint64_t *gen, struct smux_error *err);
/* Drops the token of generation @gen (a 401 answered it): the next
 * swift__auth_get authenticates again. */
void swift__auth_invalidate(struct swift_auth *a, uint64_t gen);
/* The generation of the token in use now (swift__auth_invalidate). */
uint64_t swift__auth_generation(struct swift_auth *a);

/*
 * Performs @req on "<storage_url>/<container><path_q>" with the token: on
 * a 401 drops the token, authenticates again and repeats the request once.
 * @path_q is already escaped ("" for the container itself, "/obj?x=y").
 * A refused re-authentication is CREDENTIAL_EXPIRED.
 */
int swift__do(struct swiftb *s, const struct smux_ctx *ctx,
	      struct smux__http_req *req, const char *path_q,
	      struct smux__http_resp *resp, struct smux_error *err);
/* The same on "<storage_url>/<cont_esc><path_q>" (another container of
 * the account), or "<storage_url><path_q>" with @cont_esc NULL (the
 * account: bulk delete). */
int swift__do_in(struct swiftb *s, const struct smux_ctx *ctx,
		 struct smux__http_req *req, const char *cont_esc,
		 const char *path_q, struct smux__http_resp *resp,
		 struct smux_error *err);

/* swift_slo.c */
/* The cluster's limits (/info read on the first call; a failure to read
 * it is retried on the next call and answers the defaults now). */
void swift__limits(struct swiftb *s, const struct smux_ctx *ctx,
		   struct swift_limits *out);
/* Parses an /info body into @out. 0, or -EINVAL when it is not JSON. */
int swift__limits_parse(const char *body, size_t len, struct swift_limits *out);
/*
 * Splits @size bytes into segments of about @seg_size honouring @l (the
 * minimum segment size, the most segments a manifest takes, a manifest
 * entry of @entry_bytes within the manifest size): *@seg and *@count.
 * 0, or -EFBIG when no segment size of at most 5 GiB fits.
 */
int swift__slo_plan(uint64_t size, uint64_t seg_size,
		    const struct swift_limits *l, size_t entry_bytes,
		    uint64_t *seg, uint64_t *count);
/* Uploads @src as segments of <container>_segments in order, then the
 * manifest carrying @hdrs (NULL-terminated metadata headers); the ETag of
 * the whole in @etag. Deletes its segments when it fails. */
int swift__put_slo(struct swiftb *s, const struct smux_ctx *ctx,
		   const char *key, const struct smux_source *src,
		   const char *const *hdrs, char etag[33],
		   struct smux_error *err);
/* The segments of @key when it is a large object (SLO manifest, read
 * only with @list_slo; or a DLO prefix), as "/container/object" paths in
 * *@paths (NULL, 0 when it is not one or is absent); free with
 * swift__paths_free. *@is_slo says whether it is an SLO. */
int swift__segments_of(struct swiftb *s, const struct smux_ctx *ctx,
		       const char *key, bool list_slo, char ***paths, size_t *n,
		       bool *is_slo, struct smux_error *err);
/* The same, and what its HEAD saw of @key: *@found, and the object's info
 * in @info (may be NULL) when it carries X-Object-Meta-Mtime, so that a
 * copy of it has that info but its ETag; cleared (nlink 0) otherwise. */
int swift__segments_info(struct swiftb *s, const struct smux_ctx *ctx,
			 const char *key, bool list_slo, char ***paths,
			 size_t *n, bool *is_slo, bool *found,
			 struct smux_info *info, struct smux_error *err);
/* DELETE of the SLO @key with its segments (?multipart-manifest=delete,
 * the answer checked as bulk delete's). */
int swift__delete_slo(struct swiftb *s, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err);
void swift__paths_free(char **paths, size_t n);
/* swift_dlo.c: the segments of the DLO @key whose X-Object-Manifest is
 * @manifest ("container/prefix", percent-encoded), listed; none when the
 * prefix is empty or covers @key itself (not segments to delete). */
int swift__dlo_segments(struct swiftb *s, const struct smux_ctx *ctx,
			const char *key, const char *manifest, char ***paths,
			size_t *n, struct smux_error *err);

/* swift_bulk.c */
/*
 * Deletes the objects @paths ("/container/object", unescaped): with bulk
 * delete when /info offers it (batches of max_deletes_per_request), else
 * one DELETE each. Absent ones count as deleted; any other failure of an
 * object fails the call, naming it.
 */
int swift__delete_paths(struct swiftb *s, const struct smux_ctx *ctx,
			char *const *paths, size_t n, struct smux_error *err);
/*
 * Deletes the @n objects @paths ("/container/object", unescaped; no two
 * the same) with bulk delete, whatever @l says of it, in batches of its
 * max_deletes; a path whose escaped line is longer than its max_line is
 * one DELETE instead. @rcs[i] is 0 when paths[i] is gone, else its
 * negative errno (swift__bulk_answer_paths). Returns 0 when every object
 * is gone, else the first failure's rc with @err naming its object.
 */
int swift__bulk_delete(struct swiftb *s, const struct smux_ctx *ctx,
		       char *const *paths, size_t n,
		       const struct swift_limits *l, int *rcs,
		       struct smux_error *err);
/* Checks a bulk-delete answer (JSON: "Response Status", "Errors", ...)
 * whose objects only the answer names (an SLO's segments): 0, or a
 * negative errno with @err naming the first object that failed. */
int swift__bulk_answer(const char *body, size_t len, const char *backend,
		       unsigned long *deleted, unsigned long *not_found,
		       struct smux_error *err);
/*
 * Reads the answer to a bulk delete of the @n objects @paths (unescaped,
 * as sent) per object: @rcs[i] is 0 when paths[i] is gone, else its
 * negative errno. A path in "Errors" (quoted as Swift quotes it: decoded
 * before it is matched) takes its status, 404 being gone; the paths not
 * named are gone when "Response Status" is 2xx or the counts ("Number
 * Deleted", "Number Not Found", the errors) cover every path sent, else
 * they fail with that status (a request refused whole, a run cut short);
 * an error for a path not sent fails them too. An answer that is not the
 * JSON object fails every path with BAD_RESPONSE. *@unauthorized: some
 * object (or the whole) was answered 401, which is the token's doing.
 * Returns 0 when every path is gone, else the first failure's rc, with
 * @err saying why and naming its object.
 */
int swift__bulk_answer_paths(const char *body, size_t len, const char *backend,
			     char *const *paths, size_t n, int *rcs,
			     bool *unauthorized, struct smux_error *err);
/* MD5 of @src's bytes, in hex (swift.c). 0 or a negative errno. */
int swift__source_md5(const struct smux_source *src, char hex[33]);

/* swift_absent.c: hints. A put of a key seen absent is sent with
 * "If-None-Match: *", which Swift checks: exact either way. A key seen
 * as a plain object is put or deleted without the HEAD for a large
 * object's segments (the worst case when it became one since: the
 * header of swift_absent.c). */
int swift__absent_init(struct swiftb *s);
void swift__absent_free(struct swiftb *s);
/* Notes @key absent (@absent) or present (drops an absent note; a plain
 * note stands). */
void swift__absent_note(struct swiftb *s, const char *key, bool absent);
/* Whether @key was seen absent within SWIFT_ABSENT_NS. */
bool swift__absent_seen(struct swiftb *s, const char *key);
/* Notes @key a plain object (@plain) or not known to be one (drops a
 * plain note: a large object put, a change whose result is not known). */
void swift__plain_note(struct swiftb *s, const char *key, bool plain);
/* Whether @key was seen a plain object within SWIFT_ABSENT_NS. */
bool swift__plain_seen(struct swiftb *s, const char *key);

/* swift_obj.c: an object answer's X-Object-Meta-* headers, read by
 * swift__meta_header (an on_header callback, @arg a struct swift_meta)
 * and turned into @info with @size by swift__fill_obj. */
struct swift_meta {
	char timestamp[40]; /* X-Timestamp: the version's, float seconds */
	char mtime[40];
	char mode[16];
	char uid[16];
	char gid[16];
};
int swift__meta_header(void *arg, const char *name, size_t nlen,
		       const char *value, size_t vlen);
void swift__fill_obj(struct smux_info *info, const struct smux__http_resp *r,
		     const struct swift_meta *m, uint64_t size);

/* swift_list.c */
int swift__list(struct swiftb *s, const struct smux_ctx *ctx,
		const char *prefix, const char *delimiter, smux_list_fn fn,
		void *arg, struct smux_error *err);
/* Whether anything is listed under @prefix (a directory exists). */
int swift__any_under(struct swiftb *s, const struct smux_ctx *ctx,
		     const char *prefix, bool *any, struct smux_error *err);
/* Remembers a put (@info, may be NULL) or a delete of @key. */
void swift__recent_note(struct swiftb *s, const char *key, bool deleted,
			const struct smux_info *info);
void swift__recent_free(struct swiftb *s);
/* Whether this backend put @key recently and has not deleted it since: a
 * 404 for it is Swift's race (an overwrite replacing the file a reader
 * was about to open), worth asking again. */
bool swift__recent_present(struct swiftb *s, const char *key);

#define SWIFT_FILE_MODE 0644
#define SWIFT_DIR_MODE	0755
#define SWIFT_DIR_TYPE	"application/directory"
/* Extra GETs/HEADs of a key this backend wrote when Swift answers 404
 * (its object server can miss the file an overwrite just replaced). */
#define SWIFT_RACE_RETRIES 3

static inline bool swift__key_is_dir(const char *key)
{
	size_t n = strlen(key);

	return n == 0 || key[n - 1] == '/';
}

/* swift.c */
/* swift__do on the container, making it once when it answers 404. */
int swift__do_writing(struct swiftb *s, const struct smux_ctx *ctx,
		      struct smux__http_req *req, const char *path,
		      struct smux__http_resp *resp, struct smux_error *err);
/* @b as a swift backend (NULL when it is not one). */
struct swiftb *swift__from(struct smux_backend *b);
/* "/<escaped key><query>" in a new heap string; NULL: out of memory. */
char *swift__obj_path(const char *key, const char *query);
/* "METHOD \"key\"" (the key cut at 200 bytes) for error messages. */
const char *swift__what(char *buf, size_t cap, const char *method,
			const char *key);
void swift__fill_dir(struct smux_info *info);
/* Parses a Swift timestamp "2026-05-06T20:00:00.123456" (UTC, optional
 * fraction and zone) into ns since the epoch; -1 when it is not one. */
int64_t swift__parse_iso(const char *s);

/* swift_obj.c */
/* HEAD of the object @key, no directory fallback (404: KEY_NOT_FOUND). */
int swift__head_obj(struct swiftb *s, const struct smux_ctx *ctx,
		    const char *key, struct smux_info *info,
		    struct smux_error *err);
/* ops->head and ops->get */
int swift__head(struct smux_backend *b, const struct smux_ctx *ctx,
		const char *key, struct smux_info *info,
		struct smux_error *err);
int swift__get(struct smux_backend *b, const struct smux_ctx *ctx,
	       const char *key, const struct smux_get_opts *opts,
	       struct smux_sink *sink, struct smux_info *info,
	       struct smux_error *err);

#endif /* SMUX_BACKENDS_SWIFT_INTERNAL_H */
