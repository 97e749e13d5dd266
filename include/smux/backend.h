/* SPDX-License-Identifier: MIT */
/*
 * smux/backend.h - the backend interface: one operations table per backend
 * kind, one struct smux_backend per configured instance, and one dispatch
 * wrapper per operation.
 *
 * Callers (the mux, the filesystem, tests) never call b->ops->x directly:
 * they call smux_backend_x(), which validates the key, checks the context,
 * stamps the backend name on errors and supplies the fallback for optional
 * operations. That wrapper is where tracing, stats and fault injection hook
 * in (STYLE.md "one dispatch wrapper per method").
 *
 * Threads: every operation of every backend may be called from several
 * threads at once. A writer (struct smux_writer) is used by one thread at a
 * time.
 */
#ifndef SMUX_BACKEND_H
#define SMUX_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "smux/ctx.h"
#include "smux/error.h"
#include "smux/io.h"
#include "smux/key.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SMUX_ETAG_MAX 128

/* An owner or group a backend does not know or keep. */
#define SMUX_ID_NONE UINT32_MAX

/* What head/list/put report about an object. Fields a backend does not
 * keep stay 0 (times, nlink) or SMUX_ID_NONE (uid, gid) when the struct
 * was cleared with smux_info_clear(); a zeroed struct reads as uid 0. */
struct smux_info {
	uint64_t size;
	int64_t mtime_ns;	  /* modification time, ns since the epoch */
	uint32_t mode;		  /* file type (S_IFREG, S_IFDIR, S_IFLNK,
				     S_IFIFO, S_IFSOCK) | permission bits
				     (07777); 0 = unknown. A symlink's
				     content is its target. */
	char etag[SMUX_ETAG_MAX]; /* version token ("" when none); equal
				     etags mean equal content */
	int64_t atime_ns;	  /* access time, 0 = unknown */
	int64_t ctime_ns;	  /* status change time, 0 = unknown */
	uint32_t uid, gid;	  /* owner, SMUX_ID_NONE = not kept */
	uint32_t nlink;		  /* hard links (0 = unknown) */
	bool has_owner;		  /* uid/gid are the object's */
	/* Identity of the stored file in the backend that answered (0 =
	 * unknown): two keys with one file_id are hard links of one file;
	 * distinct files have distinct ids with high probability (a file
	 * backend mixes st_dev and st_ino). Not comparable across members
	 * of a mux (each replica has its own inodes). */
	uint64_t file_id;
	/* 512-byte blocks the storage holds for it (st_blocks: less than
	 * the size for a sparse file), when has_blocks; else stat shows the
	 * size in blocks. Belongs to this size: whoever sets another size
	 * over it clears has_blocks (smux_info_set_size). */
	uint64_t blocks;
	bool has_blocks;
	/* mtime_ns, atime_ns and ctime_ns are the object's own times (a
	 * file backend's stat): 0 is then the epoch (touch -d @0), not
	 * "unknown" */
	bool has_times;
	/* the permission bits are the backend's default, not a mode kept
	 * for the object (a WebDAV server that keeps no properties shows
	 * 0644 for every file): a replica that keeps modes does not take
	 * them from it */
	bool mode_default;
};

/* Get everything from the offset on. */
#define SMUX_LEN_ALL UINT64_MAX

struct smux_get_opts {
	uint64_t offset; /* first byte; past the end yields 0 bytes */
	uint64_t length; /* bytes wanted, SMUX_LEN_ALL for the rest */
	/* Version pin: when not NULL/"" and the object's etag differs, the get
	 * fails with PRECONDITION_FAILED and writes nothing. */
	const char *if_match;
};

/* What of struct smux_put_opts is meant even when 0. */
enum smux_put_flags {
	SMUX_PUT_MODE = 1,  /* mode is meant as given (0000 stays 0000) */
	SMUX_PUT_OWNER = 2, /* uid/gid are meant (SMUX_ID_NONE: keep) */
	/* A hint, never a fact: the caller created the file after seeing
	 * the key absent (the kernel's LOOKUP, a directory's known names)
	 * and has stored nothing under it since. A backend may put without
	 * first looking for an old object (the swift backend sends a
	 * conditional create, "If-None-Match: *"), and must still be right
	 * when the key exists after all (another client wrote it). */
	SMUX_PUT_NEW = 4,
	/* A repair of a replica's content (mux_repair.c): where the key is
	 * a regular file with other names (hard links), its bytes are
	 * replaced in that file, which keeps its inode and names, not by a
	 * new file renamed over it (that split the link group). Not atomic:
	 * the caller marks the replica stale for the key first. Backends
	 * without hard links ignore it. */
	SMUX_PUT_INPLACE = 8,
	/* mtime_ns is meant as given: 0 is the epoch, not "now" (a copy of
	 * a file whose time is 0: touch -d @0, SOURCE_DATE_EPOCH=0) */
	SMUX_PUT_MTIME = 16,
};

struct smux_put_opts {
	/* permission bits to keep (0 = backend default unless SMUX_PUT_MODE);
	 * with a file type (S_IFLNK, S_IFIFO, S_IFSOCK) the object is a
	 * symlink whose target is the content (1 to PATH_MAX - 1 bytes, no
	 * NUL), or an empty special file (DESIGN section 6); no type, S_IFREG
	 * or S_IFDIR: a regular file (a marker key: a directory). A file
	 * backend makes a real symlink/FIFO/socket; a backend without them
	 * keeps the type as a marker in the object's metadata (the stored
	 * mode; docs/backends.md). Copies pass the type on. */
	uint32_t mode;
	int64_t mtime_ns;  /* mtime to keep (0 = now unless SMUX_PUT_MTIME) */
	unsigned flags;	   /* enum smux_put_flags */
	uint32_t uid, gid; /* owner with SMUX_PUT_OWNER */
	/* Writer commit only: make the content durable (fsync) before
	 * returning, not just visible. A put is always durable. */
	bool durable;
	/* Put only: the SHA-256 (32 bytes) of the whole source when the
	 * caller has it (smuxfs keeps it while a staging file is written
	 * from its start), NULL otherwise. A backend that needs the hash
	 * before sending (bunny's Checksum) then reads the source once. */
	const unsigned char *sha256;
};

/* Whether @o gives the mtime to keep (smux_put_opts.mtime_ns): a
 * non-zero one, or 0 with SMUX_PUT_MTIME. */
static inline bool smux_put_has_mtime(const struct smux_put_opts *o)
{
	return o && (o->mtime_ns != 0 || (o->flags & SMUX_PUT_MTIME));
}

/* What smux_backend_setattr changes. */
enum smux_setattr_flags {
	SMUX_SET_MODE = 1,
	SMUX_SET_MTIME = 2,
	SMUX_SET_OWNER = 4, /* uid and/or gid (SMUX_ID_NONE: keep that one) */
	SMUX_SET_ATIME = 8,
};

struct smux_setattr {
	unsigned flags;	   /* enum smux_setattr_flags */
	uint32_t mode;	   /* permission bits (SMUX_SET_MODE) */
	int64_t mtime_ns;  /* SMUX_SET_MTIME */
	uint32_t uid, gid; /* SMUX_SET_OWNER */
	int64_t atime_ns;  /* SMUX_SET_ATIME */
};

/* What a backend can do beyond the required operations (ops->caps). A mux
 * can what every member can. */
enum smux_caps {
	/* writer_open with SMUX_WRITER_INPLACE: writes land in the object
	 * itself (a local file), an append costs the appended bytes */
	SMUX_CAP_INPLACE = 1,
	/* hard links (ops->link) */
	SMUX_CAP_HARDLINK = 2,
	/* symlinks and FIFOs/sockets are native objects (not markers) */
	SMUX_CAP_SPECIAL = 4,
	/* owners (uid/gid) are kept */
	SMUX_CAP_OWNER = 8,
	/* rename of a directory key ("a/" -> "b/") is one atomic call */
	SMUX_CAP_DIR_RENAME = 16,
	/* extended attributes (user.*) */
	SMUX_CAP_XATTR = 32,
	/* head of "a" also answers for the directory "a/" (marker or
	 * implied) when no object "a" exists, so KEY_NOT_FOUND for "a"
	 * means neither: a caller need not ask "a/" again */
	SMUX_CAP_HEAD_DIR = 64,
	/* an in-place writer (SMUX_CAP_INPLACE) says at open which group its
	 * object's directory gives new objects (smux_writer.dir_group), so
	 * a creator need not look the directory up */
	SMUX_CAP_DIR_GROUP = 128,
	/* an in-place writer_open takes SMUX_WRITER_EXISTING and then
	 * reports what it opened (has_info), so a caller opening an existing
	 * object need not head it first (a mux has it in failover mode only:
	 * one target, chosen as a head's would be) */
	SMUX_CAP_OPEN_EXISTING = 256,
	/* one copy of every object: an in-place writer's commit only sets
	 * the attributes the caller chose (mode, owner, mtime) and decides
	 * nothing about where the content lives (no replica to agree with,
	 * no hint to record), so it may follow the last close instead of
	 * each close (a backend has it; a mux only with one member) */
	SMUX_CAP_ONE_COPY = 512,
	/* a delete is a request to a server, and ops->del_many removes many
	 * keys in one (S3 DeleteObjects, Swift bulk delete): a caller with
	 * many deletes to make (rm -r) does better to gather them (a mux
	 * has it when every member has it, and deletes a batch's keys in
	 * parallel, each in its mode) */
	SMUX_CAP_DEL_MANY = 1024,
	/* ops->exchange: two names swap what they hold in one atomic call
	 * (renameat2 RENAME_EXCHANGE); a mux has it where every member has
	 * it, outside sticky-by-key */
	SMUX_CAP_EXCHANGE = 2048,
	/* a listing shows every name, those starting with '.' too (nginx's
	 * WebDAV hides them: a dot name a listing lacks may be there); a
	 * mux has it when every member has it */
	SMUX_CAP_LISTS_DOTNAMES = 4096,
	/* a put of a symlink (mode S_IFLNK) is stored as one, natively or
	 * as a marker object; a mux has it when every member has it (a
	 * mirror with one member refusing them would hold a symlink on the
	 * others only, its hint never replayable) */
	SMUX_CAP_SYMLINK = 8192,
	/* the same for FIFOs and sockets (S_IFIFO, S_IFSOCK) */
	SMUX_CAP_FIFO = 16384,
	/* its calls are the kernel's own local I/O (a file backend on a
	 * local disk file system): a mux runs the short ones on the
	 * caller's thread while none of them looks stuck (bulkhead.h),
	 * saving two thread hand-offs a call. A mux and a wrapper never
	 * have it (a mux's call may wait for probes, a fault injector's
	 * may hang on purpose). */
	SMUX_CAP_INLINE = 32768,
};

/* One entry of a listing. Pointers are valid during the callback only. */
struct smux_list_entry {
	const char *key; /* full key; a common prefix ends in the delimiter */
	bool is_prefix;	 /* a "directory" folded by the delimiter */
	struct smux_info info; /* valid when !is_prefix */
};

/* Called once per entry, in byte-wise ascending key order. Return 0 to go
 * on, anything else to stop the listing (which then returns 0). */
typedef int (*smux_list_fn)(void *arg, const struct smux_list_entry *e);

struct smux_statfs {
	uint64_t total_bytes; /* 0 = unknown */
	uint64_t free_bytes;
	/* of free_bytes, what an unprivileged user may take (a local
	 * disk keeps blocks for root), when has_avail; else all of it */
	bool has_avail;
	uint64_t avail_bytes;
	uint64_t total_files;
	uint64_t free_files;
	/* the directories right under the backend's root, where it can
	 * count them at no cost (a local directory's link count, less its
	 * own work folder): the mount root's link count */
	bool has_root_dirs;
	uint64_t root_dirs;
	/* which filesystem holds the data, when has_fsid (a local
	 * directory's st_dev): members on one filesystem count once in a
	 * mux's sum */
	bool has_fsid;
	uint64_t fsid;
};

struct smux_backend;
struct smux_writer;
struct smux_reader;

/*
 * The operations of one backend kind. Required: get, put, del, head, list,
 * destroy. Optional (NULL allowed, the wrapper supplies the fallback):
 * copy, healthcheck, statfs, writer_open; reader_open has no fallback
 * (the caller reads with ranged gets instead).
 *
 * Every operation returns 0 or a negative errno and then fills @err (which
 * the wrapper guarantees is not NULL). Keys arrive already validated.
 */
struct smux_backend_ops {
	const char *kind; /* "memory", "file", ... */

	/* Streams bytes [offset, offset+length) of @key into @sink. Fills
	 * @info (may be NULL) with the object's info. A directory marker key
	 * or a directory is IS_DIRECTORY. */
	int (*get)(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_get_opts *opts,
		   struct smux_sink *sink, struct smux_info *info,
		   struct smux_error *err);

	/* Stores @src under @key, replacing any object atomically: a reader
	 * sees the old or the new content, never a mix. A key ending in '/'
	 * creates a directory marker (src length must be 0). Fills @info (may
	 * be NULL) with the stored object's info. */
	int (*put)(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_source *src,
		   const struct smux_put_opts *opts, struct smux_info *info,
		   struct smux_error *err);

	/* Removes @key. Removing an absent key succeeds (idempotent, as S3).
	 * A directory marker key removes the marker; a backend with real
	 * directories refuses a non-empty one with NOT_EMPTY. */
	int (*del)(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, struct smux_error *err);

	/* Info of @key; KEY_NOT_FOUND when absent. "dir/" answers for a
	 * directory (marker or implied). */
	int (*head)(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_info *info,
		    struct smux_error *err);

	/* Lists keys starting with @prefix in ascending order. With
	 * @delimiter ("/" is the only one backends must support), keys with
	 * the delimiter after the prefix fold into one common-prefix entry.
	 * Without it, every object is listed, and directory markers (keys
	 * ending in '/') of empty directories. */
	int (*list)(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *prefix, const char *delimiter, smux_list_fn fn,
		    void *arg, struct smux_error *err);

	/* Optional (SMUX_CAP_DEL_MANY): removes the @n object keys (no
	 * directory markers), in as few requests as the backend can.
	 * @rcs[i] is 0 when keys[i] is gone (an absent key is, as for del)
	 * or its negative errno. Returns 0 when every key is gone, else the
	 * rc of a failed key, with @err saying why (and naming that key). */
	int (*del_many)(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *const *keys, size_t n, int *rcs,
			struct smux_error *err);

	/* Optional: server-side copy of @src to @dst (replacing @dst). */
	int (*copy)(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err);

	/* Optional: renames @src to @dst (replacing an object at @dst),
	 * atomically where the backend can. Object keys only; renaming a
	 * directory is the caller's walk over the keys under it. */
	int (*rename)(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err);

	/* Optional: changes the mode and/or mtime of @key (an object or a
	 * directory marker) without rewriting its content. */
	int (*setattr)(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, const struct smux_setattr *attr,
		       struct smux_error *err);

	/* Optional: cheap liveness probe. */
	int (*healthcheck)(struct smux_backend *b, const struct smux_ctx *ctx,
			   struct smux_error *err);

	/* Optional: capacity. */
	int (*statfs)(struct smux_backend *b, const struct smux_ctx *ctx,
		      struct smux_statfs *out, struct smux_error *err);

	/* Optional: opens a pending object for @key (DESIGN section 6). With
	 * SMUX_WRITER_TRUNC it starts empty, else it starts as a copy of the
	 * current object (empty when absent). Nothing is visible under @key
	 * until commit. */
	int (*writer_open)(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, unsigned flags,
			   struct smux_writer **out, struct smux_error *err);

	/* Optional: opens one version of the object @key for ranged reads
	 * (a local file kept open, so a read costs no path walk). Fills
	 * (*out)->info. Without it callers use ranged gets pinned by etag. */
	int (*reader_open)(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, struct smux_reader **out,
			   struct smux_error *err);

	/* Optional: what the instance can do (enum smux_caps); NULL = 0. */
	unsigned (*caps)(struct smux_backend *b);

	/* Optional: the longest key (bytes) the instance takes, at most
	 * SMUX_KEY_MAX (an object store: 1024); NULL = SMUX_KEY_MAX. */
	size_t (*key_max)(struct smux_backend *b);

	/* Optional: true when the instance can never store an object under
	 * @key (an object key, valid otherwise): a name it keeps for itself
	 * (rclone_links' NAME.rclonelink). The wrappers refuse a put, a
	 * writer and a copy, rename, link or exchange onto such a key with
	 * INVALID_KEY before calling the backend; a mux refuses what any
	 * member refuses, so a mirror never stores on one replica what
	 * another cannot hold. NULL = none. */
	bool (*key_refused)(struct smux_backend *b, const char *key);

	/* Optional (SMUX_CAP_HARDLINK): makes @dst another name of the object
	 * @src. EXISTS when @dst exists. */
	int (*link)(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err);

	/* Optional: makes @key durable: an object's content and its
	 * directory entry, or a directory ("a/", "" for the root) and its
	 * entries (fsync(2) of a file or directory and what names it).
	 * Other operations need not be durable before it (only put, which
	 * promises durability itself). NULL: writes are durable when they
	 * return, nothing to do. */
	int (*sync)(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err);

	/*
	 * Optional (SMUX_CAP_XATTR): extended attributes of @key (an object
	 * or a directory, "a/"). The wrappers pass only names of the user.
	 * namespace (1 to SMUX_XATTR_NAME_MAX bytes) and values of at most
	 * SMUX_XATTR_SIZE_MAX bytes. A symlink or special file has none
	 * (NOT_SUPPORTED, as Linux answers for user.* there).
	 *
	 * getxattr: with @size 0 sets *@out_len to the value's length and
	 * writes nothing; else copies the value into @buf and sets *@out_len
	 * (ERANGE, INVALID_ARGUMENT, when it does not fit). NO_ATTR when
	 * @key has no attribute @name. */
	int (*getxattr)(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, void *buf,
			size_t size, size_t *out_len, struct smux_error *err);
	/* setxattr: @flags 0, XATTR_CREATE (EXISTS when there) or
	 * XATTR_REPLACE (NO_ATTR when absent). */
	int (*setxattr)(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, const void *value,
			size_t size, int flags, struct smux_error *err);
	/* listxattr: the user.* names, each NUL-terminated, one after the
	 * other; @size 0 and ERANGE as getxattr. */
	int (*listxattr)(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, char *buf, size_t size,
			 size_t *out_len, struct smux_error *err);
	/* removexattr: NO_ATTR when absent. */
	int (*removexattr)(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, const char *name,
			   struct smux_error *err);

	/* Optional (SMUX_CAP_EXCHANGE): the names @a and @b (object keys,
	 * no trailing '/') swap what they hold - a file, special object or
	 * directory with its tree - atomically (renameat2 RENAME_EXCHANGE).
	 * A name that holds nothing swaps as such: the other's object moves
	 * there alone (one member of a mux may hold one of the two).
	 * KEY_NOT_FOUND when neither holds anything. Its own inverse. */
	int (*exchange)(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *a, const char *bname,
			struct smux_error *err);

	/* Frees the instance; no operation is running or will run. */
	void (*destroy)(struct smux_backend *b);
};

/*
 * A backend instance. Each kind's private struct embeds this first and
 * downcasts through a helper that checks `ops` (SQLite's sqlite3_file).
 * `name` is owned by the instance; `depth` is the nesting depth of muxes
 * below and including it (0 for a leaf backend).
 */
struct smux_backend {
	const struct smux_backend_ops *ops;
	char *name;
	unsigned depth;
	atomic_int refs; /* smux_backend_ref/unref */
};

/* Fills the generic part; copies @name. 0 or -ENOMEM. refs start at 1. */
int smux_backend_init(struct smux_backend *b,
		      const struct smux_backend_ops *ops, const char *name);
/* Frees what smux_backend_init allocated (for a kind's destroy). */
void smux_backend_release(struct smux_backend *b);

/* Takes a reference. Returns @b. */
struct smux_backend *smux_backend_ref(struct smux_backend *b);
/* Drops a reference; the last one calls ops->destroy. NULL is a no-op. */
void smux_backend_unref(struct smux_backend *b);

/* Dispatch wrappers: validate, check the context, call, stamp errors. */
int smux_backend_get(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_get_opts *opts,
		     struct smux_sink *sink, struct smux_info *info,
		     struct smux_error *err);
int smux_backend_put(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_source *src,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err);
int smux_backend_del(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_error *err);
/* ops->del_many, or one del per key when the backend has none. Keys that
 * are not valid object keys fail alone (@rcs). */
int smux_backend_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *const *keys, size_t n, int *rcs,
			  struct smux_error *err);
int smux_backend_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err);
int smux_backend_list(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *prefix, const char *delimiter,
		      smux_list_fn fn, void *arg, struct smux_error *err);
/* Falls back to get into a temporary file + put when ops->copy is NULL. */
int smux_backend_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err);
/* Falls back to copy + delete when ops->rename is NULL. */
int smux_backend_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err);
/* Falls back to get + put with the new attributes when NULL. */
int smux_backend_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const struct smux_setattr *attr,
			 struct smux_error *err);
/* Falls back to a list of at most one key under "" when NULL. */
int smux_backend_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			     struct smux_error *err);
/* enum smux_caps of @b; 0 when ops->caps is NULL. */
unsigned smux_backend_caps(struct smux_backend *b);
/* The capability a put of @mode's file type needs: SMUX_CAP_SYMLINK,
 * SMUX_CAP_FIFO (FIFOs, sockets), or 0 (files, directories). */
unsigned smux_caps_for_mode(uint32_t mode);
/* What a backend lacking @cap (smux_caps_for_mode's) cannot keep, for
 * messages: "symlinks" or "FIFOs or sockets". */
const char *smux_caps_kept_name(unsigned cap);
/* The longest key @b takes: ops->key_max, SMUX_KEY_MAX when NULL (never
 * more). A mux takes what its most limited member takes. */
size_t smux_backend_key_max(struct smux_backend *b);
/* ops->key_refused of @b for the object key @key (false when NULL). */
bool smux_backend_key_refused(struct smux_backend *b, const char *key);
/* NOT_SUPPORTED (-ENOTSUP) when ops->exchange is NULL or the backend
 * lacks SMUX_CAP_EXCHANGE (a mux with a member that cannot). */
int smux_backend_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *a, const char *bname,
			  struct smux_error *err);
/* NOT_SUPPORTED (-ENOTSUP) when ops->link is NULL. */
int smux_backend_link(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err);
/* @key: an object, a directory marker "a/" or "" (the root). 0 when
 * ops->sync is NULL (nothing to do). */
int smux_backend_sync(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err);
/*
 * Extended attributes (ops->getxattr etc.). Only the user. namespace
 * passes: any other name is NOT_SUPPORTED (ENOTSUP), as is a backend
 * without the operation. A name longer than SMUX_XATTR_NAME_MAX is
 * INVALID_ARGUMENT with errno ERANGE, a value or list larger than
 * SMUX_XATTR_SIZE_MAX INVALID_ARGUMENT with E2BIG (getxattr(2)). @buf
 * NULL or @size 0 asks for the length only (*@out_len).
 */
#define SMUX_XATTR_NAME_MAX 255
#define SMUX_XATTR_SIZE_MAX 65536
int smux_backend_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, const char *name, void *buf,
			  size_t size, size_t *out_len, struct smux_error *err);
int smux_backend_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, const char *name, const void *value,
			  size_t size, int flags, struct smux_error *err);
int smux_backend_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, char *buf, size_t size,
			   size_t *out_len, struct smux_error *err);
int smux_backend_removexattr(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, const char *name,
			     struct smux_error *err);
/* Clears @info: zeros, uid/gid SMUX_ID_NONE. */
void smux_info_clear(struct smux_info *info);

/* Nanoseconds since the epoch of @sec s + @nsec ns, saturated to what an
 * int64_t holds (years 1677 to 2262): a time beyond is clamped to the
 * nearest end, as a filesystem clamps what its format cannot hold, never
 * wrapped around (a touch -d 2300 stored as 1715). */
static inline int64_t smux_time_ns(int64_t sec, long nsec)
{
	const int64_t lim = INT64_MAX / 1000000000 - 1;

	if (sec > lim)
		return INT64_MAX;
	if (sec < -lim)
		return INT64_MIN;
	return sec * 1000000000 + nsec;
}

/* Sets @info's size; a block count of another size is no longer meant. */
static inline void smux_info_set_size(struct smux_info *info, uint64_t size)
{
	if (info->size != size)
		info->has_blocks = false;
	info->size = size;
}
/*
 * Fills @po (cleared first) to store a copy of the object @info describes:
 * its type and mode as given (SMUX_PUT_MODE, 0000 included; a symlink
 * stays a symlink) when known, its mtime,
 * and its owner (SMUX_PUT_OWNER) when it has one and this process may give
 * files away (euid 0); otherwise the copy belongs to whoever writes it.
 * Every copy, repair and attribute rewrite goes through here.
 */
void smux_put_opts_keep(struct smux_put_opts *po, const struct smux_info *info);
/* Fills zeros (unknown) when NULL. */
int smux_backend_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
			struct smux_statfs *out, struct smux_error *err);

/* Convenience: whole object into a new heap buffer (tests, small files).
 * On success *@buf (free()) holds *@len bytes plus a NUL. */
int smux_backend_get_all(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, unsigned char **buf, size_t *len,
			 struct smux_error *err);
/* Convenience: put @len bytes of @buf. */
int smux_backend_put_buf(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const void *buf, size_t len,
			 struct smux_error *err);

/* ---- writers (DESIGN section 6) ---- */

enum smux_writer_flags {
	SMUX_WRITER_TRUNC = 1, /* start empty instead of from the object */
	/* SMUX_CAP_INPLACE only: write the object itself. Every pwrite is
	 * visible at once (readers of the object see it, as on a local
	 * filesystem); commit makes it durable and applies mode/mtime; close
	 * without commit keeps what was written (nothing to roll back). The
	 * object is created when absent. */
	SMUX_WRITER_INPLACE = 2,
	/* with SMUX_WRITER_INPLACE: fail with EXISTS when the object exists
	 * (O_EXCL) */
	SMUX_WRITER_EXCL = 4,
	/* with SMUX_WRITER_INPLACE (SMUX_CAP_OPEN_EXISTING): the object must
	 * exist: fail with KEY_NOT_FOUND (IS_DIRECTORY for a directory)
	 * instead of creating it or its directories (open(2) without
	 * O_CREAT) */
	SMUX_WRITER_EXISTING = 8,
	/* with SMUX_WRITER_INPLACE: the caller creates the object (a name it
	 * saw absent: open(2) with O_CREAT of a new name). A mirror or shield
	 * notes the creates its replicas make until every one returned (a
	 * crash between two is reconciled); a backend ignores it */
	SMUX_WRITER_CREATE = 16,
};

/* pwrite offset of an O_APPEND write: at the end of the object as it is
 * then (an in-place writer); other writers append at their pending size. */
#define SMUX_OFF_APPEND UINT64_MAX

struct smux_writer_ops {
	/* Writes @len bytes at @off (may extend, may leave a hole of zeros);
	 * @off SMUX_OFF_APPEND appends. */
	int (*pwrite)(struct smux_writer *w, const struct smux_ctx *ctx,
		      const void *buf, size_t len, uint64_t off,
		      struct smux_error *err);
	/* Reads back pending content; returns bytes read (short at the end)
	 * or a negative errno. Optional (NULL: the writer is write-only). */
	long (*pread)(struct smux_writer *w, void *buf, size_t len,
		      uint64_t off, struct smux_error *err);
	/* Sets the pending size (cuts or extends with zeros). */
	int (*truncate)(struct smux_writer *w, const struct smux_ctx *ctx,
			uint64_t size, struct smux_error *err);
	/* Allocates, punches or zeroes [@off, @off + @len) of the pending
	 * content as fallocate(2) with @mode: 0 (allocate; extends the size
	 * to @off + @len), SMUX_FALLOC_KEEP_SIZE (allocate, size kept),
	 * SMUX_FALLOC_PUNCH_HOLE | SMUX_FALLOC_KEEP_SIZE (zeros, space
	 * freed), SMUX_FALLOC_ZERO_RANGE (zeros; extends unless with
	 * KEEP_SIZE). The wrapper refuses any other mode. Optional (NULL:
	 * NOT_SUPPORTED). */
	int (*fallocate)(struct smux_writer *w, const struct smux_ctx *ctx,
			 int mode, uint64_t off, uint64_t len,
			 struct smux_error *err);
	/* Current pending size. */
	uint64_t (*size)(struct smux_writer *w);
	/* Makes the pending content durable and visible under the key,
	 * atomically; fills @info (may be NULL). The writer stays open: more
	 * writes and another commit may follow (fsync then more writes). */
	int (*commit)(struct smux_writer *w, const struct smux_ctx *ctx,
		      const struct smux_put_opts *opts, struct smux_info *info,
		      struct smux_error *err);
	/* Drops everything not committed and frees the writer. */
	void (*close)(struct smux_writer *w);
	/* Optional, for a writer in place: what the file it writes is now
	 * (its size after other writers' changes, also once its name is
	 * gone; a local writer: fstat of its descriptor). NULL: unknown. */
	int (*stat)(struct smux_writer *w, struct smux_info *info);
	/* Optional, for a writer in place: applies @a to the file it writes
	 * (a local writer: fchown, fchmod, futimens of its descriptor), also
	 * once its name is gone (fchmod of an unlinked file that keeps
	 * other names). NULL: -ENOTSUP. */
	int (*setattr)(struct smux_writer *w, const struct smux_setattr *a);
	/* The object has another name now (a hard link), through which
	 * another writer may change it: from here on what this one reads
	 * back is the object as it is, never a copy of its own changes (a
	 * mux writer of one target drops its spool: it reads its member
	 * and can no longer move). Optional (NULL: the kind keeps no copy
	 * of its own). */
	void (*shared)(struct smux_writer *w);
	/* Optional, for a writer in place on one copy that cannot move: a
	 * descriptor (O_RDWR, owned by the writer, valid while it is open)
	 * of the file it writes, through which the kernel may read and
	 * write the file directly (FUSE passthrough, src/fs/passthrough.c)
	 * exactly as this writer's pwrite would. The writer then counts its
	 * file as changed behind its back (its size is the file's). NULL,
	 * or -1: no such descriptor. */
	int (*passthrough_fd)(struct smux_writer *w);
	/* Optional: a close(2) of a descriptor, its writes committed (also
	 * when the commit had nothing to do): a writer of several replicas
	 * takes back those that can take it again (a mux writer: replicas
	 * back from a drain get the file, durably), so that what close(2)
	 * leaves is readable from them - the writer's own close comes
	 * later, when nobody waits. Best effort; not passed on to the
	 * writers of a mux below. NULL: nothing to do. */
	void (*settle)(struct smux_writer *w, const struct smux_ctx *ctx);
};

/* A pending object. Kinds embed this first. `key` is owned by the writer. */
struct smux_writer {
	const struct smux_writer_ops *ops;
	struct smux_backend *backend; /* holds a reference */
	char *key;
	/* pwrite takes SMUX_OFF_APPEND itself (else the wrapper turns it
	 * into the pending size); set by the kind at open */
	bool appends;
	/* The object as this open found or made it, when has_info (set by
	 * the kind at open: the in-place file writer fills it from the
	 * opened file; a mux writer of one target passes its member's on).
	 * Lets a caller that just created the object skip asking for its
	 * attributes again. */
	bool has_info;
	struct smux_info info;
	/* Set by the kind at open: the object was there already, this open
	 * did not make it (every target of a mux writer of several found
	 * it). A create that finds it so (made meanwhile by another program
	 * or mount) opens it as open(2) opens an existing file. */
	bool found;
	/* Set by the kind at open when has_dir_group (SMUX_CAP_DIR_GROUP:
	 * the in-place file writer; a mux writer passes on its first live
	 * target's): the group a new object takes from its directory, as a
	 * local filesystem gives it: that directory's group when it is
	 * set-group-ID, else SMUX_ID_NONE (the creator's). */
	bool has_dir_group;
	uint32_t dir_group;
	/* Set by the caller before close when the open failed as a whole
	 * (another target of a mux refused it): a name this open created
	 * goes with it, as the create the caller was asked for never
	 * happened (the in-place file writer removes it, when the name
	 * still holds the file it made). */
	bool unmade;
};

/* Fills the generic part (copies @key, refs @b). 0 or -ENOMEM. */
int smux_writer_init(struct smux_writer *w, const struct smux_writer_ops *ops,
		     struct smux_backend *b, const char *key);
/* Frees the generic part (for a kind's close). */
void smux_writer_release(struct smux_writer *w);

/* -ENOTSUP (NOT_SUPPORTED) when the kind has no writer: the caller then
 * stages the content itself and puts it. */
int smux_backend_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, unsigned flags,
			     struct smux_writer **out, struct smux_error *err);
int smux_writer_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		       const void *buf, size_t len, uint64_t off,
		       struct smux_error *err);
long smux_writer_pread(struct smux_writer *w, void *buf, size_t len,
		       uint64_t off, struct smux_error *err);
int smux_writer_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
			 uint64_t size, struct smux_error *err);
/* fallocate(2) modes a writer takes (the values of linux/falloc.h). */
#define SMUX_FALLOC_KEEP_SIZE  0x01
#define SMUX_FALLOC_PUNCH_HOLE 0x02
#define SMUX_FALLOC_ZERO_RANGE 0x10
/*
 * fallocate(2) on the pending content (smux_writer_ops.fallocate).
 * NOT_SUPPORTED (-EOPNOTSUPP) when the kind has none or @mode is not one
 * of the four it takes; INVALID_ARGUMENT (-EINVAL) when @len is 0, and
 * (-EFBIG) when @off + @len passes INT64_MAX. A local filesystem's refusal
 * (a mode it lacks, ENOSPC, EFBIG) is the caller's error with its errno.
 */
int smux_writer_fallocate(struct smux_writer *w, const struct smux_ctx *ctx,
			  int mode, uint64_t off, uint64_t len,
			  struct smux_error *err);
/* True for the modes smux_writer_fallocate takes (above). */
static inline bool smux_falloc_mode_ok(int mode)
{
	return mode == 0 || mode == SMUX_FALLOC_KEEP_SIZE ||
	       mode == (SMUX_FALLOC_PUNCH_HOLE | SMUX_FALLOC_KEEP_SIZE) ||
	       mode == SMUX_FALLOC_ZERO_RANGE ||
	       mode == (SMUX_FALLOC_ZERO_RANGE | SMUX_FALLOC_KEEP_SIZE);
}
/* True when a fallocate with @mode may extend the size (mode 0 or
 * ZERO_RANGE without KEEP_SIZE). */
static inline bool smux_falloc_extends(int mode)
{
	return !(mode & SMUX_FALLOC_KEEP_SIZE);
}
uint64_t smux_writer_size(struct smux_writer *w);
/* What the file @w writes in place is now (ops->stat): 0, or -ENOTSUP when
 * the kind cannot say, or another negative errno. */
int smux_writer_stat(struct smux_writer *w, struct smux_info *info);
/* Applies @a to the file @w writes in place (ops->setattr): 0, -ENOTSUP
 * when the kind cannot, or another negative errno. */
int smux_writer_setattr(struct smux_writer *w, const struct smux_setattr *a);
int smux_writer_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		       const struct smux_put_opts *opts, struct smux_info *info,
		       struct smux_error *err);
/* Aborts what is not committed and frees @w; NULL is a no-op. */
void smux_writer_close(struct smux_writer *w);
/* smux_writer_ops.shared: @w's object has several names. NULL is a
 * no-op, as is a kind without the method. Cannot fail. */
void smux_writer_shared(struct smux_writer *w);
/* smux_writer_ops.passthrough_fd: the descriptor, or -1 (also for a kind
 * without the method). */
int smux_writer_passthrough_fd(struct smux_writer *w);
/* smux_writer_ops.settle; a no-op for NULL or a kind without it. */
void smux_writer_settle(struct smux_writer *w, const struct smux_ctx *ctx);

/* ---- readers ---- */

struct smux_reader_ops {
	/* Reads up to @len bytes at @off of the version opened (a live
	 * reader: of the object as it is now); returns the bytes read (short
	 * only at the end) or a negative errno. PRECONDITION_FAILED when that
	 * version is gone or changed (a reader never mixes two versions). */
	long (*pread)(struct smux_reader *r, const struct smux_ctx *ctx,
		      void *buf, size_t len, uint64_t off,
		      struct smux_error *err);
	/* Frees the reader. */
	void (*close)(struct smux_reader *r);
	/* Optional, for a live reader: what the object opened is now (its
	 * size and attributes after changes in place, also once its name
	 * is gone). NULL: info as of the open. */
	int (*stat)(struct smux_reader *r, struct smux_info *info);
	/* Optional: applies @a to the object opened (a local reader: its
	 * descriptor's file, also once its name is gone), on every copy the
	 * tree keeps of it. NULL: -ENOTSUP. */
	int (*setattr)(struct smux_reader *r, const struct smux_setattr *a);
	/* Optional: whether the version opened is still the object's
	 * current one under @key (its name now): smux_reader_current. NULL:
	 * a head of @key on r->backend, its token compared with r->info's. */
	int (*current)(struct smux_reader *r, const struct smux_ctx *ctx,
		       const char *key, struct smux_error *err);
	/* Optional, for a live reader that may move to another copy (a
	 * mux's): the object was written in place through the caller since
	 * the open, and @info is what it is now (a head's answer): a move
	 * to another copy requires that version from now on, not the one
	 * opened (the reader reads one file that changed, as a descriptor
	 * of a local file does). NULL: nothing to do. */
	void (*rebase)(struct smux_reader *r, const struct smux_info *info);
};

/* One version of one object, open for reading. pread may run on several
 * threads at once (the kernel reads ahead in parallel); close runs
 * alone. Kinds embed this first. */
struct smux_reader {
	const struct smux_reader_ops *ops;
	struct smux_backend *backend; /* holds a reference */
	struct smux_info info;	      /* of the version opened */
	/* Reads follow the object as it is changed in place (a local file
	 * kept open: it grows, and a rename or unlink leaves the inode
	 * readable), so callers need not check the version: info is as of
	 * the open, pread reads to the end as it is now. Else pread serves
	 * the version opened or fails PRECONDITION_FAILED. */
	bool live;
};

/* Fills the generic part (refs @b). */
void smux_reader_init(struct smux_reader *r, const struct smux_reader_ops *ops,
		      struct smux_backend *b);
/* Frees the generic part (for a kind's close). */
void smux_reader_release(struct smux_reader *r);

/* NOT_SUPPORTED (-ENOTSUP) when the kind has no reader: the caller then
 * reads with ranged gets (if_match = the etag it saw). IS_DIRECTORY for a
 * directory. */
int smux_backend_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, struct smux_reader **out,
			     struct smux_error *err);
long smux_reader_pread(struct smux_reader *r, const struct smux_ctx *ctx,
		       void *buf, size_t len, uint64_t off,
		       struct smux_error *err);
/* Frees @r; NULL is a no-op. */
void smux_reader_close(struct smux_reader *r);
/* What the object @r opened is now (ops->stat), else its info as of the
 * open. 0, or a negative errno with *info as of the open. */
int smux_reader_stat(struct smux_reader *r, struct smux_info *info);
/* Applies @a to the object @r opened (ops->setattr): 0, -ENOTSUP when the
 * kind cannot, or another negative errno. */
int smux_reader_setattr(struct smux_reader *r, const struct smux_setattr *a);
/* Whether @key (the name of the object @r opened, now) still holds the
 * version @r opened (ops->current): 0; PRECONDITION_FAILED when another
 * version is current there (a write since, also one the store @r reads
 * missed); another error when it cannot tell. A live reader follows its
 * object: 0. A token is compared only with one of the same store: a mux
 * reader heads the key where it is read now and compares by the
 * member's token when it is the one read, else by size and mtime
 * (mux_version.c). */
int smux_reader_current(struct smux_reader *r, const struct smux_ctx *ctx,
			const char *key, struct smux_error *err);
/* ops->rebase: @r's object was written in place through the caller and is
 * @info now. NULL @r, or a kind without it: a no-op. */
void smux_reader_rebase(struct smux_reader *r, const struct smux_info *info);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_BACKEND_H */
