/* SPDX-License-Identifier: MIT */
/*
 * backends/bunny_internal.h - what the bunny backend's modules share:
 * bunny.c (the instance, the request path, head, construction),
 * bunny_get.c, bunny_put.c (put, del), bunny_list.c and bunny_json.c (the
 * DESCRIBE and listing answers, parsed with jansson). Not a public header.
 *
 * Every byte of an answer is hostile: the body is bounded before it is
 * parsed, names must be one key segment, numbers must be numbers, and a
 * malformed document is an error, never a partial listing.
 */
#ifndef SMUX_BACKENDS_BUNNY_INTERNAL_H
#define SMUX_BACKENDS_BUNNY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/http_client.h"
#include "core/keynotes.h"
#include "smux/backend.h"

/* Longest ObjectName kept (bytes): one key segment. */
#define SMUX__BUNNY_NAME_MAX 1024
/* Most entries one listing may hold. */
#define SMUX__BUNNY_ENTRIES_MAX 1000000u

/* One object or directory as DESCRIBE and listings give it. */
struct smux__bunny_obj {
	char *name;	   /* ObjectName (heap), one segment */
	bool is_dir;	   /* IsDirectory */
	uint64_t length;   /* Length */
	int64_t mtime_ns;  /* LastChanged read as UTC; 0 when absent */
	char checksum[65]; /* uppercase SHA-256 hex, "" when null/absent */
};

/*
 * Parses "YYYY-MM-DDTHH:MM:SS[.fraction][Z]" as UTC (Bunny's timestamps
 * carry no zone; they are UTC). ns since the epoch, or -1 when malformed.
 */
int64_t smux__bunny_parse_time(const char *s, size_t len);

/* Parses one DESCRIBE answer (@len bytes) into @o (o->name to free).
 * 0, or -EBADMSG with a reason in @why. */
int smux__bunny_parse_obj(const char *buf, size_t len,
			  struct smux__bunny_obj *o, char *why, size_t wl);

/* Parses a listing (a JSON array of objects): *@out (free with
 * smux__bunny_objs_free) and *@n. 0, -EBADMSG (@why), -E2BIG, -ENOMEM. */
int smux__bunny_parse_list(const char *buf, size_t len,
			   struct smux__bunny_obj **out, size_t *n, char *why,
			   size_t wl);

void smux__bunny_objs_free(struct smux__bunny_obj *v, size_t n);

/* The uppercase hex of a SHA-256 digest (@mdlen bytes, 32) into @hex (65
 * bytes, NUL-terminated): Bunny's Checksum form. */
void smux__bunny_hex(const unsigned char *md, unsigned int mdlen, char *hex);

/* ---- the instance, shared by bunny.c, bunny_get.c, bunny_put.c and
 * bunny_list.c ---- */

/* Longest listing or DESCRIBE answer read (bytes): ~300 bytes an entry. */
#define BUNNY_LIST_MAX	   (256ull << 20)
#define BUNNY_DESCRIBE_MAX (64u << 10)

/* Permission bits reported (Bunny keeps none). */
#define BUNNY_FILE_MODE 0644
#define BUNNY_DIR_MODE	0755

/* Rounds of the HTTP layer's attempts a request answered 429 gets. */
#define BUNNY_429_ROUNDS 4

/* Most requests one instance keeps in flight. */
#define BUNNY_CONCURRENCY_MAX 64

/* The key head() never finds: the health probe's DESCRIBE. */
#define BUNNY_PROBE_KEY ".smuxfs-health-probe"

/* Slots of the listed-files memory, and how long a note is a hint. */
#define BUNNY_SEEN_SLOTS 2048
#define BUNNY_SEEN_NS	 (60LL * 1000000000LL)

struct bunnyb {
	struct smux_backend base; /* first: downcast by smux__bunny_from */
	struct smux__http *http;
	char *base_url;	  /* "<endpoint>/<escaped zone>/" */
	char *zone;	  /* for messages */
	char *region;	  /* for messages: "de" or the code given */
	char *host;	  /* for messages: the host asked */
	char *key_header; /* "AccessKey: <password>": secret, wiped */
	/* request slots */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned inflight, max_inflight;
	/* the server answered a Range with 200 once: later gets ask for it
	 * all and stop reading once the range is in */
	atomic_bool no_range;
	/* a DESCRIBE answered for a directory once: a 404 is an absence,
	 * not a directory DESCRIBE does not describe */
	atomic_bool describe_dirs;
	/* renames that uploaded the caller's local copy (bunny_rename.c) */
	atomic_ulong n_local_renames;
	/* files the listings showed (bunny_seen.c, core/keynotes.h): whole
	 * gets without a DESCRIBE first; NULL: no hints */
	struct smux__keynotes *seen;
};

/* The instance behind @b, NULL when @b is not a bunny backend. */
struct bunnyb *smux__bunny_from(struct smux_backend *b);
/* Its name, for errors. */
const char *smux__bunny_name(struct bunnyb *z);
/* "" and keys ending in '/' name directories. */
bool smux__bunny_key_is_dir(const char *key);
/* NO_MEMORY; returns -ENOMEM. */
int smux__bunny_nomem(struct bunnyb *z, struct smux_error *err);
/* "<base_url><escaped key>" (+ '/' when @slash and the key has none), a
 * heap string; NULL when out of memory. */
char *smux__bunny_url(struct bunnyb *z, const char *key, bool slash);
/* Performs @req with the AccessKey in a request slot; 429 gets more
 * rounds; 401 is INVALID_OPTIONS naming zone and region. */
int smux__bunny_do(struct bunnyb *z, const struct smux_ctx *ctx,
		   const struct smux__http_req *in,
		   struct smux__http_resp *resp, struct smux_error *err);
/* "METHOD \"key\"" for messages (never a URL). */
const char *smux__bunny_what(char *buf, size_t cap, const char *method,
			     const char *key);
/* The info of a directory, and of an object as DESCRIBE or a listing
 * gives it (etag: the SHA-256, else size and LastChanged). */
void smux__bunny_fill_dir(struct smux_info *info, int64_t mtime_ns);
void smux__bunny_fill_obj(struct smux_info *info,
			  const struct smux__bunny_obj *o);
/* DESCRIBE @key into *@o (o->name to free); 404 is KEY_NOT_FOUND. */
int smux__bunny_describe(struct bunnyb *z, const struct smux_ctx *ctx,
			 const char *key, struct smux__bunny_obj *o,
			 struct smux_error *err);
/* The entries of directory @dir ("" or "a/b/"); an absent one is empty. */
int smux__bunny_list_one(struct bunnyb *z, const struct smux_ctx *ctx,
			 const char *dir, struct smux__bunny_obj **out,
			 size_t *n, struct smux_error *err);

/* bunny_seen.c: hints for whole-object gets, checked by the SHA-256 of
 * the bytes read. Notes @o for @key (a file with a Checksum; else, or
 * @o NULL, drops @key's note). */
int smux__bunny_seen_init(struct bunnyb *z);
void smux__bunny_seen_free(struct bunnyb *z);
void smux__bunny_seen_note(struct bunnyb *z, const char *key,
			   const struct smux__bunny_obj *o);
/* Whether @key was listed within BUNNY_SEEN_NS: its Length, LastChanged
 * and Checksum in *@o (o->name NULL). */
bool smux__bunny_seen_get(struct bunnyb *z, const char *key,
			  struct smux__bunny_obj *o);

/* The operations (struct smux_backend_ops of smux/backend.h). */
int smux__bunny_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err);
int smux__bunny_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err);
int smux__bunny_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err);
int smux__bunny_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err);
/* bunny_rename.c: put under @dst from the local copy or a get, then del. */
int smux__bunny_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst,
		       struct smux_error *err);
int smux__bunny_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err);

#endif /* SMUX_BACKENDS_BUNNY_INTERNAL_H */
