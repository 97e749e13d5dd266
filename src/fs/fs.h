/* SPDX-License-Identifier: MIT */
/*
 * fs.h - internal header of the smuxfs daemon (src/fs/).
 *
 * Ties the daemon's modules together: the mount-wide state (struct
 * smuxfs), path-to-key mapping and error mapping (ops.c), the FUSE
 * operations (ops.c, ops_meta.c, ops_io.c), the open-file table with its
 * staging and upload (ofile.c), the read cache (rcache.c), the .smux/
 * virtual directory (smuxdir.c) and logging (log.c). main.c owns the
 * command line, daemonizing and the mount. Nothing here is part of
 * libsmux.
 *
 * Threads: every FUSE operation may run concurrently (fuse_loop_mt). The
 * fields of struct smuxfs are set before the loop starts and read-only
 * afterwards, except the tables, which have their own locks.
 */
#ifndef SMUX_FS_FS_H
#define SMUX_FS_FS_H

#define FUSE_USE_VERSION 35

#include <fuse.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fs/config.h"
#include "fs/rcache.h"
#include "smux/backend.h"
#include "smux/events.h"

/* ---- logging (log.c) ---- */

/* Sets where messages go: stderr (@foreground) or syslog ("smuxfs");
 * @debug lets LOG_DEBUG messages through. Call before any thread starts. */
void smux_log_init(bool foreground, bool debug);
/* Logs at a syslog level (LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG).
 * Thread-safe. */
void smux_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* True when messages of @level are emitted (to skip costly formatting). */
bool smux_log_enabled(int level);

/* ---- the open-file table and the version table (ofile.c) ---- */

#define SMUXFS_OFILE_BUCKETS 1024
#define SMUXFS_ETAG_SLOTS    4096

struct smuxfs_ofile;

/* Open files, keyed by backend key; one struct smuxfs_ofile per key. */
struct smuxfs_otable {
	pthread_mutex_t lock; /* protects buckets[] and every ofile's key,
				 refs, in_table and next */
	struct smuxfs_ofile *buckets[SMUXFS_OFILE_BUCKETS];
	struct smuxfs_fh *readers; /* clean read-only FILE handles, so a
				      rename can re-key them (an open fd
				      follows its file) */
};

/* key -> etag seen at the last open (for keep_cache). Direct-mapped, so
 * bounded: a collision forgets the older key. */
struct smuxfs_etags {
	pthread_mutex_t lock; /* protects slots[] */
	struct {
		char *key; /* owned; NULL = empty slot */
		char etag[SMUX_ETAG_MAX];
	} slots[SMUXFS_ETAG_SLOTS];
};

/* ---- names just found absent (absent.c) ---- */

#define SMUXFS_ABSENT_SLOTS 64
/* how long a note stays usable: the kernel sends its MKDIR right after
 * the LOOKUP; what another client makes meanwhile is not seen */
#define SMUXFS_ABSENT_WINDOW_NS 1000000000LL

struct smuxfs_absent {
	pthread_mutex_t lock; /* protects slots[] */
	struct {
		char *key;	   /* owned; NULL = empty slot */
		int64_t at_ns;	   /* CLOCK_MONOTONIC of the note */
		unsigned long gen; /* fs->mutations then */
	} slots[SMUXFS_ABSENT_SLOTS];
};

/* ---- directories' attributes (dircache.c) ---- */

#define SMUXFS_DIRCACHE_SLOTS 1024

struct smuxfs_dircache {
	pthread_mutex_t lock; /* protects slots[] */
	atomic_ulong gen;     /* moved by every change of a directory */
	struct {
		char *key; /* owned; NULL = empty slot */
		struct smux_info info;
		int64_t at_ns;	   /* CLOCK_MONOTONIC when its lookup began */
		unsigned long gen; /* gen when its lookup began */
	} slots[SMUXFS_DIRCACHE_SLOTS];
};

/* ---- directories' complete lists of names (dirnames.c) ---- */

#define SMUXFS_DIRNAMES_DIRS  1024
#define SMUXFS_DIRNAMES_NAMES 65536

struct smuxfs_dirnames;

/* writers kept between opens (linger.c) */
struct smuxfs_linger;

/* ---- the delete queue (delq.c) ---- */

struct smuxfs_delq;

/* What .smux and the metrics show of it. */
struct smuxfs_delq_counts {
	bool on;
	size_t queued;	       /* names queued or being deleted now */
	unsigned long batches; /* batch calls sent */
	unsigned long deleted; /* names deleted from the store */
	unsigned long dropped; /* refused by the store: shown again */
	unsigned long retried; /* failed deletes kept to send again */
};

/* ---- files' attributes (attrcache.c) ---- */

#define SMUXFS_ATTRCACHE_SLOTS 8192

struct smuxfs_attrcache;

/* ---- the directory rename journal (rename_journal.c) ---- */

/* One key-by-key directory rename in progress: its record's path ("" when
 * there is none). */
struct smuxfs_rjournal {
	char path[PATH_MAX];
	int fd; /* the record, flock'ed while its move runs; -1: none */
};

/* Open FILE handles by the kernel's node (fnode.c). */
#define SMUXFS_FNODE_BUCKETS 256
/* FUSE opcodes counted one by one (fnode.c); the last slot takes the rest */
#define SMUXFS_FUSE_OPCODES 64

struct smuxfs_fh;

/* FUSE passthrough (passthrough.c) */
#define SMUXFS_PT_BUCKETS 64
struct smuxfs_pt_node;
/*
 * A file registered with the FUSE device as a backing file (an id the
 * OPEN reply names), kept while nobody has it open: the descriptor of a
 * writer in place, registered at its first open, stays registered while
 * the writer lives (an ofile, a writer kept by linger.c), so the next
 * open of the same writer - `echo >> log` in a loop - replies with it
 * at once (no dup, fstat, register and unregister per open). Held by one
 * owner at a time (a node while it has passthrough handles, the handle
 * its node gave it back to at the last release, the writer's ofile, a
 * kept writer, a handle being opened); whoever closes the writer closes
 * it (smuxfs_pt_reg_close). All zero: none (calloc'ed holders).
 */
struct smuxfs_pt_reg {
	bool held; /* id is one, owned by the holder */
	int32_t id;
	dev_t dev; /* the backing file */
	ino_t ino;
};
struct smuxfs_passthrough {
	pthread_mutex_t lock; /* protects bucket[] */
	bool want;	      /* [mount] passthrough is not off (main.c) */
	atomic_int devfd;     /* the FUSE device (set with the hook; -1
				 once closed at the unmount) */
	atomic_bool on;	      /* the kernel agreed at INIT */
	atomic_bool warned;   /* a refused backing file was logged */
	atomic_uint_least64_t opens;	/* handles opened in passthrough */
	atomic_uint_least64_t backings; /* backing files registered */
	atomic_int registered;		/* of them, not unregistered yet */
	struct smuxfs_pt_node *bucket[SMUXFS_PT_BUCKETS];
};

struct smuxfs_fnodes {
	pthread_mutex_t lock; /* protects buckets[] and every handle's
				 nodeid, nnext, nlisted and gone */
	struct smuxfs_fh *buckets[SMUXFS_FNODE_BUCKETS];
	unsigned listed; /* handles in buckets[] (under lock) */
	unsigned gone;	 /* of those, whose name went (gone.init) */
	/* the kernel leaves clearing set-id bits to the daemon
	 * (FUSE_HANDLE_KILLPRIV_V2, set by the hook at INIT) */
	atomic_bool killpriv_v2;
	/* requests read from the channel, by opcode (the last counts
	 * every opcode past the others) */
	atomic_uint_least64_t requests[SMUXFS_FUSE_OPCODES];
	/* nanoseconds from reading a request to writing its reply */
	atomic_uint_least64_t request_ns[SMUXFS_FUSE_OPCODES];
};

/*
 * What a FILE handle's file is once its name is gone (fnode.c): the names
 * it has left (another hard link keeps it in the tree) and what fchmod,
 * fchown and futimens set through any descriptor of it since, which fstat
 * shows, as a local filesystem keeps them in the inode. Nothing of it is
 * stored: the file goes away at the last close.
 */
struct smuxfs_gone {
	bool init;	  /* the name went while this handle was open */
	uint64_t file_id; /* the file's identity then (0 unknown) */
	uint32_t links;	  /* names left */
	unsigned set;	  /* enum smux_setattr_flags set since */
	uint32_t mode, uid, gid;
	int64_t mtime_ns, atime_ns, ctime_ns;
	/* the owner its name had when it went (was_owned: known) */
	bool was_owned;
	uint32_t was_uid, was_gid;
	/* the size the file's last writer left (its descriptors closed
	 * while readers stay): a reader's own idea is the size it opened */
	bool has_size;
	uint64_t size;
	/* the kernel's node lost the name, the file did not: a rename of
	 * another name of it over that name (smuxfs_fnode_unnamed), until
	 * the name goes; requests without a name go to the file by it */
	bool named;
};

/* The SHA-256 of a staging file kept while it is written from its start
 * (stagehash.c). Zeroed: none. */
struct smuxfs_stagehash {
	void *mc; /* EVP_MD_CTX */
	uint64_t len;
	bool ok;
};
void smuxfs_stagehash_start(struct smuxfs_stagehash *h);
void smuxfs_stagehash_write(struct smuxfs_stagehash *h, uint64_t off,
			    const void *buf, size_t len);
void smuxfs_stagehash_truncate(struct smuxfs_stagehash *h, uint64_t size);
void smuxfs_stagehash_lost(struct smuxfs_stagehash *h);
/* The hash of @size bytes into @out, if that is what is hashed. */
bool smuxfs_stagehash_get(const struct smuxfs_stagehash *h, uint64_t size,
			  unsigned char out[32]);
void smuxfs_stagehash_free(struct smuxfs_stagehash *h);

/* ---- mount-wide state ---- */

struct smuxfs {
	struct smux_config *cfg;    /* owned by main.c */
	struct smux_fs_opts *opts;  /* inside cfg */
	struct smux_backend *root;  /* one reference, owned by main.c */
	struct smux_events *events; /* may be NULL */
	const char *prefix;	    /* key prefix ("" or "a/b/") */
	size_t prefix_len;
	/* the longest key the root takes at mount (its most limited
	 * member's, smux_backend_key_max); 0 = SMUX_KEY_MAX */
	size_t key_max;
	int staging_fd; /* O_PATH of cache_dir/staging, for O_TMPFILE */
	bool ro;	/* -o ro: every change is EROFS */
	/* stage every write in cache_dir even when the root has a writer
	 * (environment SMUXFS_FORCE_STAGING=1; for tests of that path) */
	bool force_staging;
	/* every backend keeps real directories: no "dir/" marker lookups
	 * for missing keys (smux_config_real_dirs) */
	bool real_dirs;
	/* a local directory somewhere in the tree (smux_config_has_file):
	 * no attribute cache (attrcache.c), no directories' names kept
	 * (dirnames.c) */
	bool has_file;
	/* a WebDAV or file backend in the tree (smux_config_has_http,
	 * _has_file): directories' mtimes move with their entries, so a
	 * change drops its directory's entry from the daemon's directory
	 * cache (dircache.c) */
	bool dir_mtimes;
	/* a Bunny backend in the tree (smux_config_has_bunny): staging
	 * files keep their SHA-256 as they are written (stagehash.c) */
	bool stage_sha256;
	/* open readers (each may hold a file descriptor) and their limit,
	 * half of RLIMIT_NOFILE: past it opens read with ranged gets */
	atomic_long readers;
	long max_readers;
	/* bumped by every change made through the mount (a commit, unlink,
	 * rename, setattr, an open for writing): listings and readers taken
	 * before it must check what they hold (ops_dir.c, ops_io.c) */
	atomic_ulong mutations;
	uid_t uid; /* reported owner */
	gid_t gid;
	mode_t umask;	  /* applied to reported modes (0 = none) */
	int64_t mount_ns; /* reported when a time is unknown */
	/* /sys/class/bdi/MAJ:MIN/read_ahead_kb of the mount ("" unknown);
	 * written once by the first getattr, after the kernel has applied
	 * the INIT reply (which would lower it again). */
	char readahead_path[96];
	atomic_bool readahead_done;
	atomic_llong last_mtime_ns; /* smuxfs_unique_mtime() */
	/* The root directory has no key in any backend: chmod, chown and
	 * utimens on it are kept here while mounted. root_mode is S_IFDIR |
	 * the bits once set (0: the default, 0755; 0000 is S_IFDIR alone),
	 * root_mtime_ns 0 means mount_ns, root_uid/root_gid SMUX_ID_NONE
	 * the mount's uid/gid. */
	atomic_uint root_mode;
	atomic_llong root_mtime_ns;
	atomic_uint root_uid, root_gid;
	struct smuxfs_otable otable;
	struct smuxfs_etags etags;
	struct smuxfs_absent absent;
	struct smuxfs_dircache dircache;
	struct smuxfs_attrcache *attrcache; /* attrcache.c; NULL: off */
	struct smuxfs_dirnames *dirnames;   /* dirnames.c; NULL: off */
	struct smuxfs_delq *delq;	    /* delq.c; NULL: off */
	struct smuxfs_linger *linger;	    /* linger.c; NULL: off */
	struct smuxfs_fnodes fnodes;
	struct smuxfs_passthrough pt;
	/* cache_dir/read (rcache.c), NULL when read_cache is off */
	struct smuxfs_rcache *rcache;
	/* the config file, absolute (ctl.c's add and reload.c read it
	 * again) */
	char config_path[PATH_MAX];
	/* the mount point, resolved at mount (reload and add refuse a file
	 * backend under it: config_dirs.c smux_config_check_under_mount) */
	char mount_path[PATH_MAX];
	/* reload.c: serializes reloads and adds; the config applied last
	 * (NULL: cfg), what .smux/config shows, under cfg_lock */
	pthread_mutex_t reload_lock;
	pthread_mutex_t cfg_lock;
	struct smux_config *live_cfg;
	/* event_webhook (webhook.c), NULL without one */
	struct smuxfs_webhook *webhook;
	/* the span exporter (otlp.c), NULL without otlp_endpoint */
	struct smuxfs_otlp *otlp;
	/* .smux/events (eventlog.c), NULL without an event bus */
	struct smuxfs_eventlog *evlog;
};

/* Initialises the tables of @fs (the other fields are the caller's). */
int smuxfs_init_tables(struct smuxfs *fs);
/* Closes every ofile still open (committing dirty ones, logged) and frees
 * the tables. No operation may run any more. */
void smuxfs_release_tables(struct smuxfs *fs);

/* The mount's state from inside a FUSE operation. */
struct smuxfs *smuxfs_get(void);

/* A CLOCK_REALTIME ns value greater than every one returned before in this
 * process: the mtime of a commit, so every replica gets the same one. */
int64_t smuxfs_unique_mtime(struct smuxfs *fs);

/* Forgets the etag recorded for @key (its content changed through us)
 * and counts a mutation (fs->mutations). */
void smuxfs_etag_forget(struct smuxfs *fs, const char *key);

/* Names just found absent (absent.c): smuxfs_lookup notes a name the
 * backends said is not there; a create-like operation takes the note
 * (true: still fresh, nothing changed through the mount since; no need
 * to ask again). init/release with the tables. */
void smuxfs_absent_init(struct smuxfs *fs);
void smuxfs_absent_release(struct smuxfs *fs);
void smuxfs_absent_note(struct smuxfs *fs, const char *key);
bool smuxfs_absent_take(struct smuxfs *fs, const char *key);

/* Directories' attributes (dircache.c), on object stores, for
 * attr_timeout. A lookup reads gen and the time before it asks the
 * backends and puts what a directory answered with them (refused when
 * something changed meanwhile); get gives it while fresh; every change
 * of a directory's attributes or existence calls changed with the key it
 * changed (NULL: everything; @up: its ancestors too, when it removed a
 * key) once it is done. */
void smuxfs_dircache_init(struct smuxfs *fs);
void smuxfs_dircache_release(struct smuxfs *fs);
unsigned long smuxfs_dircache_gen(struct smuxfs *fs);
int64_t smuxfs_dircache_now(void);
void smuxfs_dircache_changed(struct smuxfs *fs, const char *key, bool up);
/* @key was created, written, removed or renamed: on a mount with a
 * WebDAV or file backend (fs->dir_mtimes) its directory's entry goes (the
 * server or the disk moved the directory's mtime and, for a directory,
 * its link count; tar compares a directory's stat before and after
 * reading it). */
void smuxfs_dircache_parent_changed(struct smuxfs *fs, const char *key);
bool smuxfs_dircache_get(struct smuxfs *fs, const char *key,
			 struct smux_info *info);
void smuxfs_dircache_put(struct smuxfs *fs, const char *key,
			 const struct smux_info *info, unsigned long gen,
			 int64_t started_ns);
/*
 * Directories' complete lists of names (dirnames.c), on object stores,
 * for dir_cache_timeout. A listing (or a mkdir) reads gen of its
 * directory and now() before it asks the backends and installs the
 * names it found with them (refused when a name was added meanwhile);
 * absent is true when @key's directory's names are known and @key's name
 * is not one of them (answer ENOENT with no request). Every change
 * through the mount that can make a name calls add with its key once it
 * is done (failed or not); a removal that succeeded calls del; a
 * directory removed or renamed calls forget (NULL: every directory; ""
 * the root and all). @dir and @key are backend keys (a directory's key
 * has no trailing '/'). All take the module's lock; none calls a
 * backend. init/release with the tables. A mux root's listing is taken
 * as complete only while every member of its tree is up with no hint
 * pending, at gen and at install alike, and no member's state changed
 * in between (a sticky shard that is down holds keys no listing shows).
 */
void smuxfs_dirnames_init(struct smuxfs *fs);
void smuxfs_dirnames_release(struct smuxfs *fs);
unsigned long smuxfs_dirnames_gen(struct smuxfs *fs, const char *dir);
int64_t smuxfs_dirnames_now(void);
void smuxfs_dirnames_install(struct smuxfs *fs, const char *dir,
			     const char *const *names, size_t n,
			     unsigned long gen, int64_t started_ns);
void smuxfs_dirnames_add(struct smuxfs *fs, const char *key);
void smuxfs_dirnames_del(struct smuxfs *fs, const char *key);
void smuxfs_dirnames_forget(struct smuxfs *fs, const char *dir);
bool smuxfs_dirnames_absent(struct smuxfs *fs, const char *key);
/* Test hook: lowers the bounds (directories, names in all). */
void smuxfs__dirnames_bounds(struct smuxfs *fs, size_t dirs, size_t names);
/* Files' attributes (attrcache.c), on object stores, for attr_timeout.
 * A lookup reads gen (of its key) and the time before its head and puts
 * what a file answered with them; get gives it while fresh and while the
 * key did not change through the mount since the head began; forget
 * (called by smuxfs_etag_forget and smuxfs_dircache_changed after every
 * change) forgets the key's, changed (a rename, a failed commit or
 * setattr) all. */
void smuxfs_attrcache_init(struct smuxfs *fs);
void smuxfs_attrcache_release(struct smuxfs *fs);
unsigned long smuxfs_attrcache_gen(struct smuxfs *fs, const char *key);
/* Whether it keeps anything (an object-store tree, attr_timeout > 0). */
bool smuxfs_attrcache_on(struct smuxfs *fs);
/* Moved by every change (forget, changed) before the gens it moves: a
 * listing that reads it before it is sent, and reads a key's gen and
 * then the same epoch again, knows that gen is the one of before. */
unsigned long smuxfs_attrcache_epoch(struct smuxfs *fs);
void smuxfs_attrcache_changed(struct smuxfs *fs);
void smuxfs_attrcache_forget(struct smuxfs *fs, const char *key);
bool smuxfs_attrcache_get(struct smuxfs *fs, const char *key,
			  struct smux_info *info);
void smuxfs_attrcache_put(struct smuxfs *fs, const char *key,
			  const struct smux_info *info, unsigned long gen,
			  int64_t started_ns);
/* A file a listing gave complete attributes of, sent when the epoch was
 * @epoch and the time @started_ns: put as a HEAD's answer would be,
 * unless something changed through the mount since (ops_dir.c,
 * relist.c). */
void smuxfs_attrcache_put_listed(struct smuxfs *fs, const char *key,
				 const struct smux_info *info,
				 unsigned long epoch, int64_t started_ns);
/* What a clean read-only open may pin instead of asking (ops_io.c): a
 * fresh entry of a plain file with an etag, on a root whose gets of one
 * key go to one member. */
bool smuxfs_attrcache_pin(struct smuxfs *fs, const char *key,
			  struct smux_info *info);
/* Whether smuxfs_attrcache_pin can pin on this root at all (its gets of
 * one key go to one member). */
bool smuxfs_attrcache_pins(struct smuxfs *fs);
/* A listing's entries looked up in parallel (listattr.c): @key is the
 * entry's key, @is_dir on input says the listing showed a directory
 * (a common prefix: its "key/" is asked at once); on output @ok says
 * @is_dir and @info hold what the lookup found. */
#define SMUXFS_LISTATTR_PARALLEL 8
#define SMUXFS_LISTATTR_MAX	 4096
struct smuxfs_listattr_item {
	char *key;
	bool is_dir, ok;
	struct smux_info info;
};
void smuxfs_listattr_fetch(struct smuxfs *fs,
			   struct smuxfs_listattr_item *items, size_t n);
/* A listing of the directory @prefix whose @n entries lack attributes
 * (takes @items and their keys); the first lookup of a name in it within
 * attr_timeout asks them all in parallel (prefetch: true when it did). */
#define SMUXFS_LISTED_SLOTS 16
void smuxfs_listattr_note(struct smuxfs *fs, const char *prefix,
			  struct smuxfs_listattr_item *items, size_t n);
bool smuxfs_listattr_prefetch(struct smuxfs *fs, const char *key);
void smuxfs_listattr_release(void);
/* Directories whose listings give files complete (relist.c): note says
 * which files the last listing of @prefix gave complete (@names, @n;
 * copied; 0: none, the directory is forgotten); relist lists the
 * directory of @key again when @key is one of them, puts its files in
 * attrcache.c and returns true (the caller looks there again); false:
 * not one of them, or the listing failed (the caller heads). */
#define SMUXFS_RELIST_SLOTS 64
#define SMUXFS_RELIST_MAX   1000
void smuxfs_relist_note(const char *prefix, const char *const *names, size_t n);
bool smuxfs_relist(struct smuxfs *fs, const char *key);
void smuxfs_relist_release(void);
/* The attributes of @key known to be a directory (ops.c): its "key/"
 * asked at once, as a create's parent is. */
int smuxfs_lookup_dir(struct smuxfs *fs, const char *key, bool *is_dir,
		      struct smux_info *info);
/* Records @etag for @key; returns true when it equals the etag recorded
 * before (the kernel may keep its page cache). "" never matches. */
bool smuxfs_etag_check(struct smuxfs *fs, const char *key, const char *etag);

/* ---- open files (ofile.c) ---- */

/* How an ofile is opened. */
enum smuxfs_ofile_flags {
	SMUXFS_OF_TRUNC = 1,  /* start empty (O_TRUNC, create) */
	SMUXFS_OF_CREATE = 2, /* a new file: dirty from the start, so even an
				 empty one is committed */
	SMUXFS_OF_EXCL = 4,   /* O_EXCL: fail with -EEXIST when the key
				 exists (where the backend can tell) */
};

/*
 * Finds or opens the ofile of @key and takes a reference. A new ofile
 * opens a backend writer (SMUX_WRITER_TRUNC with SMUXFS_OF_TRUNC) or,
 * when the root has none, a staging file filled from the object unless
 * truncating. An existing one is shared; SMUXFS_OF_TRUNC then truncates
 * it to 0. @mode: permission bits of a created file (else taken from the
 * object). Returns 0 or a negative errno.
 */
int smuxfs_ofile_open(struct smuxfs *fs, const char *key, unsigned flags,
		      mode_t mode, struct smuxfs_ofile **out);
/* Takes another reference on @of (which the caller holds or knows alive)
 * and returns it. */
struct smuxfs_ofile *smuxfs_ofile_hold(struct smuxfs *fs,
				       struct smuxfs_ofile *of);
/* Whether @of writes in place on a tree of one copy (SMUX_CAP_ONE_COPY):
 * its writes are stored when they return and a commit only sets the
 * attributes, so a handle may commit at its release instead of at each
 * close (ops_io.c spares the kernel's FLUSH). */
bool smuxfs_ofile_late(struct smuxfs_ofile *of);
/* Whether what @of holds is what is stored: written in place on one copy
 * (smuxfs_ofile_late), or in place on replicas with everything written
 * committed (a replica a write missed has its hint, which keeps readers
 * off it). A clean reader then reads what the ofile would give. */
bool smuxfs_ofile_stored(struct smuxfs_ofile *of);
/* A descriptor of the file @of writes in place on one copy that the
 * kernel may read and write directly (passthrough.c; a dup the caller
 * closes), or -1. */
int smuxfs_ofile_passthrough_fd(struct smuxfs_ofile *of);
/* Moves the registration @of keeps for its writer (struct smuxfs_pt_reg)
 * into *@reg for a handle's open reply: true when there is one, the file
 * is still written in place and is a regular file without set-id bits
 * (looked at by this open when the registration came back with a writer
 * kept by linger.c, else now). */
bool smuxfs_ofile_take_pt_reg(struct smuxfs_ofile *of,
			      struct smuxfs_pt_reg *reg);
/* Gives @of (NULL: nobody) the registration *@reg its node let go of at
 * its last passthrough handle's release: kept when it is of @of's writer's
 * file, else closed. *@reg is none afterwards. */
void smuxfs_ofile_park_pt_reg(struct smuxfs *fs, struct smuxfs_ofile *of,
			      struct smuxfs_pt_reg *reg);
/* The file of @of may have been written behind its writer (through a
 * passthrough handle): its size as the file has it, its readers told,
 * and (@dirty: a commit follows) dirty with its times moved, as after a
 * write through the mount. */
void smuxfs_ofile_written_behind(struct smuxfs *fs, struct smuxfs_ofile *of,
				 bool dirty);
/* Late, with nothing its creator chose left to give: its handles may
 * commit at release instead of at each close (fi->noflush). A create
 * gives its mode and owner at once (in place on one copy); if that
 * failed, they go at close, so that what stat shows once close(2)
 * returned stays (git's index keeps ctime; make, rsync) */
bool smuxfs_ofile_noflush(struct smuxfs_ofile *of);
/* A close(2) of a handle of @of, after its commit: its writer takes back
 * the replicas that can (smux_writer_settle). */
void smuxfs_ofile_settle(struct smuxfs_ofile *of);
/* Drops a reference; the last one commits a still dirty ofile once more
 * (logging failures at error level) and closes it. */
void smuxfs_ofile_release(struct smuxfs *fs, struct smuxfs_ofile *of);
/* The ofile of @key with a reference, or NULL. Deleted ofiles are not
 * in the table. */
struct smuxfs_ofile *smuxfs_ofile_find(struct smuxfs *fs, const char *key);

/* I/O on the pending content. Each returns bytes / 0, or a negative
 * errno. */
long smuxfs_ofile_read(struct smuxfs *fs, struct smuxfs_ofile *of, char *buf,
		       size_t len, uint64_t off);
long smuxfs_ofile_write(struct smuxfs *fs, struct smuxfs_ofile *of,
			const char *buf, size_t len, uint64_t off);
int smuxfs_ofile_truncate(struct smuxfs *fs, struct smuxfs_ofile *of,
			  uint64_t size);
/* fallocate(2) of the pending content (smux_writer_fallocate's @mode):
 * the writer's, or the staging file's own. */
int smuxfs_ofile_fallocate(struct smuxfs *fs, struct smuxfs_ofile *of, int mode,
			   uint64_t off, uint64_t len);
/*
 * Makes the content visible under the key when dirty (and durable when
 * @durable). 0 when there was nothing to do or the commit succeeded; a
 * negative errno otherwise (the ofile stays dirty). A deleted ofile
 * commits nothing.
 */
int smuxfs_ofile_commit(struct smuxfs *fs, struct smuxfs_ofile *of,
			bool durable);

/* Attributes of the pending content (for getattr). */
struct smuxfs_ofile_attr {
	uint64_t size;
	uint32_t mode; /* permission bits, 0 = unknown */
	int64_t mtime_ns;
	bool dirty;
	bool deleted;  /* its name was unlinked or replaced */
	bool mode_set; /* mode is meant (0000 too), else unknown */
	/* with has_owner: the owner a created file gets at its commit (its
	 * caller's, smuxfs_caller_owner), shown until then; otherwise the
	 * object's owner is shown. Callers zero the struct first. */
	uint32_t uid, gid;
	bool has_owner;
	/* created through the mount and not committed yet: no object in
	 * the backend to ask for the rest */
	bool unstored;
	/* the stored file's identity last seen (smux_info.file_id, 0 none):
	 * it keeps its inode number once its name is gone */
	uint64_t file_id;
	/* the identity its st_ino showed first while open (0 none yet).
	 * Where the tree keeps copies (smuxfs_pin_ino), every answer about
	 * the open file shows it: the replica that answers is another file
	 * of another file system after a drain (the next one up answers),
	 * and a new file after a replay rewrote a copy, and a program that
	 * holds the file checks its path still names it (sqlite refuses to
	 * write a database whose path's st_ino differs from its
	 * descriptor's: SQLITE_READONLY_DBMOVED, s44-t4) */
	uint64_t ino_id;
	/* seen_ok: the object as it was at open (owner, times, links; no
	 * etag), still true (nothing changed it through the mount); else
	 * look it up. ctime_ns: its last change through the ofile, 0 none */
	bool seen_ok;
	unsigned seen_gen; /* for smuxfs_ofile_set_seen */
	struct smux_info seen;
	int64_t ctime_ns;
	/* written in place: the stored size is the size (smuxfs_lookup);
	 * seen_ns when seen was taken, size_unknown after an O_APPEND write */
	bool inplace;
	int64_t seen_ns;
	bool size_unknown;
	/* in place, and size is what the storage holds now (the writer's
	 * stat: also what others wrote or truncated since), with the
	 * blocks it holds when has_blocks (holes filled keep the size) */
	bool size_stored;
	bool has_blocks;
	uint64_t blocks;
};
/* 0, or the negative errno with which the ofile failed to open. */
int smuxfs_ofile_attr(struct smuxfs_ofile *of, struct smuxfs_ofile_attr *a);
/* smuxfs_ofile_attr's ino_id alone (no stat of its writer). */
uint64_t smuxfs_ofile_shown_id(struct smuxfs_ofile *of);

/* chmod / utimens on an open file. Stored in the ofile (what it reports,
 * and the next commit's). Returns true when the change waits for that
 * commit (a dirty staged file, or one its creator is still writing in
 * place): the caller must not touch the backend; false: the caller
 * applies it to the backend now. */
bool smuxfs_ofile_set_mode(struct smuxfs_ofile *of, uint32_t mode);
/* fchmod, fchown or futimens of @of's handle after its name went: applied
 * to the file it writes in place (its other names show it), if it does;
 * a failure is logged (what fstat shows is kept with the handle). */
void smuxfs_ofile_setattr_nameless(struct smuxfs *fs, struct smuxfs_ofile *of,
				   const struct smux_setattr *a);
/* @key was changed through the mount (a commit; a setattr, which left
 * its content as it was): its open readers pin the version there is now
 * at their next read (a touch on WebDAV is another version of the same
 * bytes; every read after it was ESTALE). */
void smuxfs_readers_written(struct smuxfs *fs, const char *key);
/* A read handle @fh of @key written through the mount since its version
 * was pinned takes the version there is now (ops_io.c; before its read,
 * and before a GETATTR with the handle answers its size). */
void smuxfs_fh_repin(struct smuxfs *fs, struct smuxfs_fh *fh, const char *key);
/* The same after a write in place into the file @file_id (the writer's
 * own, when it knows it; 0: unknown): a reader of that very file whose
 * name went to another file meanwhile (renamed over behind the mount)
 * reads on from it. */
void smuxfs_readers_written_id(struct smuxfs *fs, const char *key,
			       uint64_t file_id);
/* Something changed the object @key through the mount (setattr, link):
 * an open file of it looks the object up again. */
void smuxfs_ofile_forget_seen(struct smuxfs *fs, const char *key);
/* @key was given another name (link): the writers of both change one
 * stored file, so an open file of @key reads back that file, never a
 * copy of its own writes (smux_writer_shared). No-op when not open. */
void smuxfs_ofile_shared(struct smuxfs *fs, const char *key);
/* True when a file other than @key is open (cheap: the table only). */
bool smuxfs_ofile_open_besides(struct smuxfs *fs, const char *key);
/* @a was applied to the file @key names, of identity @file_id: its other
 * open names (hard links) show it too. */
void smuxfs_ofile_links_changed(struct smuxfs *fs, const char *key,
				uint64_t file_id, const struct smux_setattr *a);
/* What a lookup of an open file without seen_ok found the object to be
 * (its owner, times, links), kept unless something changed it through the
 * mount since smuxfs_ofile_attr gave @gen. */
void smuxfs_ofile_set_seen(struct smuxfs_ofile *of, unsigned gen,
			   const struct smux_info *info);
/* chown on an open file created here and not committed yet (staged, or
 * in place by its creator): true when it keeps the owner for its commit
 * (SMUX_ID_NONE: that half unchanged), so the caller must not touch the
 * backend; false otherwise (commit first, then change the object). */
bool smuxfs_ofile_set_owner(struct smuxfs_ofile *of, uint32_t uid,
			    uint32_t gid);
/* Remembers the stored file's identity seen by a lookup (0: ignored). */
void smuxfs_ofile_set_file_id(struct smuxfs_ofile *of, uint64_t file_id);
bool smuxfs_ofile_set_mtime(struct smuxfs_ofile *of, int64_t mtime_ns);
/*
 * A chmod, chown or utimens (@a) of a file its creator still writes in
 * place on one copy (tar: create, write, futimens, fchown, fchmod,
 * close), applied now through the writer's descriptor: no member call,
 * and nothing left for a commit at close. 1 when applied, 0 when @of is
 * not such a file (fold or set as before), or a negative errno.
 */
int smuxfs_ofile_setattr_now(struct smuxfs_ofile *of,
			     const struct smux_setattr *a);
/*
 * What is left of a utimens (the atime) whose mtime went with @of's next
 * commit (smuxfs_ofile_set_mtime folded it), for a file not committed
 * since it was created or changed: through the writer when it writes the
 * file in place (a failover's standby while the primary is out, which a
 * change by name would not reach: the key's holder is the primary), or
 * nothing when no version of it is stored yet (staged or streamed: its
 * times are its commit's). 1 when done so, 0 when the caller changes the
 * object by its name, or a negative errno.
 */
int smuxfs_ofile_setattr_open(struct smuxfs_ofile *of,
			      const struct smux_setattr *a);

/* unlink(2) of @key: deletes the object and, once that succeeded, takes
 * an open file of @key out of the table and marks it deleted, so nothing
 * of it is committed again (its handles keep working on what they hold).
 * A failed delete changes nothing. 0 or a negative errno. */
int smuxfs_ofile_unlink(struct smuxfs *fs, const char *key);
/*
 * rename of an object key: commits a dirty ofile of @from, renames the
 * object in the backend and, only once that succeeded, orphans an ofile
 * of @to (as unlink) and moves the ofile (if any) to @to with its writer
 * reopened there. Returns 0 or a negative errno.
 */
int smuxfs_ofile_rename(struct smuxfs *fs, const char *from, const char *to);
/*
 * rename(2) of @from over @to, two names of one file: the store keeps
 * both, but the kernel moved @from's node to @to, so what is open through
 * it goes by @to from now on (an unlink of @to the kernel sends through
 * that node is theirs). Re-keys the readers of @from, and its ofile when
 * none is open under @to. Returns true when @from's ofile kept @from (one
 * is open under @to too): its handles are on the node the kernel now
 * calls @to, but go by @from.
 */
bool smuxfs_ofile_renamed_same(struct smuxfs *fs, const char *from,
			       const char *to);

/* Commits every dirty ofile whose key starts with @prefix (before a
 * directory walk that must see them in the backend). 0 or the first
 * failure. */
int smuxfs_ofile_commit_under(struct smuxfs *fs, const char *prefix);
/* After the directory @from ("a/") was renamed to @to ("b/") in one
 * backend call: every open file and reader under @from now names its key
 * under @to (open writers were committed before the rename). */
void smuxfs_ofile_rekey_under(struct smuxfs *fs, const char *from,
			      const char *to);

/* After the names @a and @b (object keys; @a_dir, @b_dir: each held a
 * directory) swapped what they hold in one backend call (rename(2) with
 * RENAME_EXCHANGE): every open file and reader of one (under it, for a
 * directory) names the other from now on (open writers were committed
 * before the exchange). */
void smuxfs_ofile_exchanged(struct smuxfs *fs, const char *a, bool a_dir,
			    const char *b, bool b_dir);

/* Calls @fn for every ofile (not deleted) whose key is directly inside
 * the directory key @dir ("" or "a/b/"), with its name and attributes.
 * Holds the table lock: @fn must not call back into the table. */
void smuxfs_ofile_each_in(struct smuxfs *fs, const char *dir,
			  void (*fn)(void *arg, const char *name,
				     const struct smuxfs_ofile_attr *a),
			  void *arg);

/* ---- file handles (fi->fh) ---- */

enum smuxfs_fh_kind {
	SMUXFS_FH_FILE,	   /* a backend object */
	SMUXFS_FH_VIRTUAL, /* a .smux/ file: a snapshot */
	SMUXFS_FH_DIR,	   /* an open directory (readdir gets no path) */
};

struct smuxfs_dirsnap;

struct smuxfs_fh {
	enum smuxfs_fh_kind kind;
	char *key;		 /* FILE: the key (owned) */
	char *path;		 /* DIR: the path (owned) */
	struct smuxfs_ofile *of; /* FILE: the ofile (a reference) or NULL for
				    a clean read-only open */
	bool writable;
	char etag[SMUX_ETAG_MAX]; /* FILE: version pinned at open ("" none) */
	/* FILE, clean read-only: the version opened, when the root offers
	 * readers (owned; else reads are ranged gets with if_match) */
	struct smux_reader *reader;
	atomic_ulong mutations; /* fs->mutations when the reader was checked */
	atomic_bool reader_off; /* renamed: read the new key with gets */
	atomic_bool unlinked;	/* its name was unlinked or replaced */
	/* FILE, clean read-only: its file was written in place through the
	 * mount since the pin (ofile.c): the next read pins the new version,
	 * as a local file's reader sees an append (tail -f) */
	atomic_bool repin;
	/* the file the write that set repin went to (0: unknown) */
	_Atomic uint64_t repin_id;
	/* FILE, clean read-only: renames over its name in flight (ofile.c);
	 * a read that overlapped one cannot tell which file it got */
	atomic_uint replacing;
	/* FILE, clean read-only: pinned from attrcache.c's entry, not asked
	 * at open; until a read served, a version changed since re-pins
	 * (another client wrote within attr_timeout) */
	atomic_bool pin_cached, served;
	pthread_mutex_t pin_lock; /* etag and size of an open FILE handle */
	/* FILE: held by the read that re-pins (ops_io.c repin), across its
	 * head: a read beside it waits for the new pin, not reading the old
	 * one's size as the end of the file */
	pthread_mutex_t repin_lock;
	/* this handle wrote (or created): only a handle that wrote
	 * commits at close; set by concurrent writes, read by flush */
	atomic_bool wrote;
	/* FILE: opened with fi->noflush (smuxfs_ofile_late): commits at
	 * release, as flush would have */
	bool late_commit;
	uint64_t size;		     /* FILE: size at open */
	char *data;		     /* VIRTUAL: the snapshot (owned) */
	struct smuxfs_dirsnap *snap; /* DIR: the listing (ops_dir.c) */
	size_t len;
	/* FILE, clean read-only: read-ahead of its reads (rcache.c) */
	struct smuxfs_rcache_ra ra;
	/* FILE without ofile: in otable.readers; key and links protected by
	 * otable.lock once tracked */
	bool tracked;
	struct smuxfs_fh *rprev, *rnext;
	/* DIR: in ops_dir.c's table of open directory handles */
	struct smuxfs_fh *dprev, *dnext;
	/* VIRTUAL, .smux/events (eventlog.c; under its lock): where this
	 * reader is in the stream, and its poll handle while it waits */
	bool ev_stream;
	bool ev_waiting;
	bool ctl; /* VIRTUAL: .smux/ctl (ctl.c) */
	uint64_t ev_shift, ev_pos;
	struct fuse_pollhandle *ev_ph;
	struct smuxfs_fh *ev_next;
	/* FILE: the kernel's node of the file (fnode.c), in fs->fnodes once
	 * nlisted; protected by fs->fnodes.lock */
	uint64_t nodeid;
	bool nlisted;
	struct smuxfs_fh *nnext;
	struct smuxfs_gone gone; /* FILE: once nameless (fnode.c) */
	/* FILE (passthrough.c): a descriptor of its file offered for
	 * passthrough until the reply to its open (pt_has_fd: owned);
	 * counted under node pt_node once the reply went, in passthrough
	 * (the kernel reads and writes it without us) when pt_on */
	int pt_fd;
	/* FILE (passthrough.c): a registration of its writer's file offered
	 * instead of pt_fd (owned until the reply), then the one its node
	 * gave back at the release (for its ofile) */
	struct smuxfs_pt_reg pt_reg;
	bool pt_has_fd, pt_counted; /* under fs->pt.lock once replied */
	bool pt_late; /* a writer whose writes may land in its file as is */
	atomic_bool pt_on;
	uint64_t pt_node;
};

/* Puts a clean read-only FILE handle on the readers list (so renames
 * re-key it); smuxfs_fh_free takes it off. */
void smuxfs_fh_track(struct smuxfs *fs, struct smuxfs_fh *fh);

void smuxfs_fh_free(struct smuxfs *fs, struct smuxfs_fh *fh);
/* The key a FILE handle names now (its ofile's, which follows renames)
 * into @key of @cap bytes. 0 or -ENAMETOOLONG. */
int smuxfs_fh_key(struct smuxfs *fs, struct smuxfs_fh *fh, char *key,
		  size_t cap);

/* ---- open files whose name is gone, inode numbers (fnode.c) ---- */

/* st_ino of a file whose tree has hard links: its identity in the backend
 * (smux_info.file_id) with this bit set, which no kernel node id (below
 * 2^32 in libfuse) has. Every other st_ino the daemon reports is 0, and
 * the channel hook puts the kernel node's id in its place (use_ino = 1). */
#define SMUXFS_INO_FILE_ID (UINT64_C(1) << 63)

/* ---- one number per file whichever replica answers (inomap.c) ---- */

/* The identity (SMUXFS_INO_FILE_ID cleared) a file of @nlink names
 * whose replica identity is @id shows: for a file of several names, the
 * number another of its names showed before the answering replica moved
 * (a drain, an outage); else @id. */
uint64_t smuxfs_ino_alias(uint64_t id, uint32_t nlink);
/* A stat of @key, a file of @nlink names, answered with the identity
 * @id: the identity to show (the number @key showed, when @id is the
 * same file on another replica: may ask the members once). */
uint64_t smuxfs_ino_learn(struct smuxfs *fs, const char *key, uint64_t id,
			  uint32_t nlink);
/* @key, whose replica identity is @id, shows @shown (the number an open
 * file keeps, a new link's name the one of the file's first name): the
 * key's number from now on, and every name of that copy's (inomap.c). */
void smuxfs_ino_shows(struct smuxfs *fs, const char *key, uint64_t id,
		      uint64_t shown, uint32_t nlink);
/* @from is named @to now (a rename through the mount), or is gone (@to
 * NULL: a delete). */
void smuxfs_ino_moved(const char *from, const char *to);
/* A directory was renamed: every key under it names another file now. */
void smuxfs_ino_dir_moved(void);

/* ---- the inode numbers the kernel holds (told.c) ---- */

/* The reply to a request read at @asked_ns (smux_now_ns) told the
 * kernel @ino (st_ino) for node @nodeid, valid for @valid_s seconds and
 * @valid_ns nanoseconds. */
void smuxfs_told_note(uint64_t nodeid, int64_t asked_ns, uint64_t ino,
		      uint64_t valid_s, uint32_t valid_ns);
/* The file identity (SMUXFS_INO_FILE_ID cleared) the kernel may still
 * show for @nodeid from its attribute cache; 0 when none. */
uint64_t smuxfs_told_id(uint64_t nodeid);
/* smuxfs_told_id of the node the current request (an OPEN) opens; 0
 * when there is none (fnode.c). */
uint64_t smuxfs_fnode_told_id(void);

/* Tells the kernel the attributes of the current request's node are
 * stale (a change the request made that its reply does not carry: the
 * set-id bits a WRITE cleared). */
void smuxfs_fnode_inval_attr(void);

/* Installs the FUSE channel hook on @se (after the mount, before the
 * loop): fstat of an open file whose name was unlinked or replaced then
 * reaches smuxfs_getattr without a path and with handle 0. 0 or a
 * negative errno. */
int smuxfs_fnode_hook(struct smuxfs *fs, struct fuse_session *se);
/*
 * Whether the kernel leaves clearing setuid/setgid on a write, truncation
 * or chown to the daemon (FUSE_HANDLE_KILLPRIV_V2, which the hook asks
 * for: the kernel then stops asking for security.capability on every
 * write). When true, *@asked says whether the current request asks for
 * it (a WRITE, an OPEN with O_TRUNC or a SETATTR of the size by a caller
 * without CAP_FSETID).
 */
bool smuxfs_fnode_killpriv(struct smuxfs *fs, bool *asked);
/* Requests the channel carried with opcode @op (the kernel's numbers) so
 * far, the nanoseconds the daemon took to answer them (into @ns) and that
 * opcode's name; for an opcode the hook has no name for, "" and the
 * count of all such opcodes together. */
uint64_t smuxfs_fnode_requests(struct smuxfs *fs, unsigned op,
			       const char **name, uint64_t *ns);
/* Lists @fh under the kernel node @nodeid (once; the hook calls it). */
void smuxfs_fnode_add(struct smuxfs *fs, struct smuxfs_fh *fh, uint64_t nodeid);
/* The node of the current request (the channel hook's; 0 outside one). */
uint64_t smuxfs_fnode_cur_nodeid(void);
/* Directory handle @fh (listed by its opendir) lost its directory, which
 * was @was (NULL unknown): fstat and fchmod/fchown/futimens of it answer
 * from what it was, as the nameless files' handles do. */
void smuxfs_fnode_dir_gone(struct smuxfs *fs, struct smuxfs_fh *fh,
			   const struct smux_info *was);
/* Takes @fh off the list (smuxfs_fh_free calls it). */
void smuxfs_fnode_del(struct smuxfs *fs, struct smuxfs_fh *fh);
/* Copies @n bytes at byte @off of the reply in @iov into @p, or (@write)
 * from @p into the reply. False when the reply is shorter. */
bool smuxfs_iov_at(const struct iovec *iov, int count, size_t off, void *p,
		   size_t n, bool write);

/* ---- FIFOs, sockets, devices whose name is gone (fnode_special.c) ---- */

struct fuse_in_header;
/* The channel hook read request @in (@n bytes): a SETATTR's argument and
 * the caller are kept for the reply; a FORGET drops what is kept. */
void smuxfs_special_request(const struct fuse_in_header *in, size_t n);
/* The reply to @opcode of node @nodeid in @iov (after the hook's patches)
 * is on its way: keeps or refreshes the attributes of a special node. */
void smuxfs_special_reply(const struct iovec *iov, int count, uint32_t opcode,
			  uint64_t nodeid);
/* The same for the struct fuse_entry_out at byte @off (READDIRPLUS). */
void smuxfs_special_entry(const struct iovec *iov, int count, size_t off);
/* A reply of ESTALE to GETATTR or SETATTR of a kept node: answers it on
 * @fd from what is kept instead; true when it did (the reply in @iov is
 * then dropped). */
bool smuxfs_special_answer(int fd, const struct iovec *iov, int count,
			   uint32_t opcode, uint64_t unique, uint64_t nodeid);
/* Drops everything kept (at the unmount). */
void smuxfs_special_free(void);

/* ---- FUSE passthrough (passthrough.c) ---- */

/* The kernel's INIT request (its argument, @have bytes), then libfuse's
 * reply to it in @iov: asks for passthrough when the kernel offers it. */
void smuxfs_pt_init_request(const void *arg, size_t have);
void smuxfs_pt_init_reply(struct smuxfs *fs, const struct iovec *iov,
			  int count);
/* The reply to the OPEN or CREATE of FILE handle @fh of node @nodeid,
 * its struct fuse_open_out at byte @off of @iov: made a passthrough one
 * when @fh offers a descriptor (fh->pt_fd) or its node is in passthrough,
 * and the handle counted under its node. Before the kernel has it. */
void smuxfs_pt_open_reply(struct smuxfs *fs, struct smuxfs_fh *fh,
			  uint64_t nodeid, const struct iovec *iov, int count,
			  size_t off);
/* @fh is released (smuxfs_fh_free): uncounted, the node's backing file
 * closed with its last passthrough handle. */
void smuxfs_pt_release(struct smuxfs *fs, struct smuxfs_fh *fh);
/* Unregisters *@reg (if any); it is none afterwards. */
void smuxfs_pt_reg_close(struct smuxfs *fs, struct smuxfs_pt_reg *reg);
/* At unmount. */
void smuxfs_pt_free(struct smuxfs *fs);
/*
 * A rename of another name of the same file over @key (@info: what @key
 * is, hard links counted) changed nothing, but libfuse gave the kernel's
 * node of @key no name (the source's node took it): the handles opened
 * by @key go on as nameless ones do (fstat, fchmod, futimens come without
 * a name), their file keeping every name it has.
 */
void smuxfs_fnode_unnamed(struct smuxfs *fs, const char *key,
			  const struct smux_info *info);
/* In a request the hook gave handle 0: the name the file of the current
 * request's node still has (smuxfs_fnode_unnamed), in @key; -ESTALE when
 * it has none, and the request is one of a nameless file. */
int smuxfs_fnode_named_key(struct smuxfs *fs, char *key, size_t cap);
/* After an unlink of @key or a rename over it succeeded: every listed
 * handle of @key has no name any more. @was: what the name was (its
 * nlink and file_id: the names its file has left, and a nameless file of
 * the same identity loses one), NULL when unknown. Takes the table lock
 * (smuxfs_fh_key): call it without holding that. */
void smuxfs_fnode_unlinked(struct smuxfs *fs, const char *key,
			   const struct smux_info *was);
/* After a link of a file of identity @file_id succeeded: its nameless
 * open handles count one more name. */
void smuxfs_fnode_linked(struct smuxfs *fs, uint64_t file_id);
/* Whether an open handle lost its name while its file kept others (hard
 * links): a change through those names concerns it. */
bool smuxfs_fnode_nameless(struct smuxfs *fs);
/* After a chmod, chown or utimens @attr of the file of identity @file_id
 * through a name: its nameless open handles show it (what they set
 * themselves before is no longer what the file has). */
void smuxfs_fnode_links_changed(struct smuxfs *fs, uint64_t file_id,
				const struct smux_setattr *attr);
/* True when smuxfs_fnode_unlinked of @key has work for what the name
 * was: a FILE handle of that name is open, or a nameless one counts the
 * names its file has left. An unlink or rename looks the name up first
 * only then (sqlite deletes its journal while the database is open). */
bool smuxfs_fnode_busy(struct smuxfs *fs, const char *key);
/* At teardown, once no FUSE request runs: frees the FILE handles the
 * kernel never released (the mount went while they were open), but not
 * their ofiles (smuxfs_release_tables frees those). */
void smuxfs_fnode_free_unreleased(struct smuxfs *fs);
/*
 * What fstat of a nameless file shows beyond @info (from its content):
 * the attributes set through its descriptors since the name went, into
 * @info, and its names left (the return value). @fh: the handle, or NULL
 * for the node of the current request (a getattr or setattr the hook gave
 * handle 0).
 */
uint32_t smuxfs_fnode_gone_info(struct smuxfs *fs, struct smuxfs_fh *fh,
				struct smux_info *info);
/* fchmod, fchown, futimens of the nameless file of the current request's
 * node (the hook gave it handle 0): kept for every handle of it. 0, or
 * -ESTALE when the request is no such setattr or its handles are gone. */
int smuxfs_fnode_setattr(struct smuxfs *fs, const struct smux_setattr *attr);
/*
 * In a getattr that the hook gave handle 0: what the nameless file of the
 * current request's node is. 0 with *@of set (a reference, release it
 * with smuxfs_ofile_release) when a handle has pending content, else 0
 * with @info filled from a reader's version; -ESTALE when the request is
 * no such getattr or the handles are gone.
 */
int smuxfs_fnode_orphan(struct smuxfs *fs, struct smuxfs_ofile **of,
			struct smux_info *info);
/* In a getattr whose name was not found: the file of the current
 * request's node is open all the same (moved or removed behind the mount,
 * or a rename through it not yet seen by the handle). 0 with *@of set (a
 * reference) when a handle has pending content, else 0 with @info from a
 * live reader (a local file: fstat of its descriptor); -ENOENT when no
 * handle of the node can say. */
int smuxfs_fnode_behind(struct smuxfs *fs, struct smuxfs_ofile **of,
			struct smux_info *info);
/* The pending content (an ofile, with a reference) of another handle of
 * @fh's kernel node, or NULL: a reader whose file lost its name reads
 * what a writer of that file wrote, as descriptors of one inode do. */
struct smuxfs_ofile *smuxfs_fnode_ofile(struct smuxfs *fs,
					struct smuxfs_fh *fh);

/* ---- path and error mapping, attributes (ops.c) ---- */

/*
 * "/a/b" -> prefix + "a/b" into @key (@cap bytes); "/" -> the prefix
 * without its trailing '/' ("" without a prefix). -ENAMETOOLONG for a
 * name over 255 bytes or a key longer than the root takes (fs->key_max,
 * less one byte for a directory's '/'): every operation on such a path
 * answers it the same way, before any lookup. -EINVAL for what no key
 * can name.
 */
int smuxfs_path_key(struct smuxfs *fs, const char *path, char *key, size_t cap);
/* The negative errno of a libsmux error (EIO when it has none). Logs
 * errors other than "not found" at debug level with @op and @key. */
int smuxfs_errno(const struct smux_error *err, const char *op, const char *key);
/* The same, without the log line. */
int smuxfs_errno_of(const struct smux_error *err);
/* A context for one backend call (the mux bulkhead bounds it). */
void smuxfs_ctx(struct smux_ctx *ctx);
/* The directory prefix of a directory key: "" for "", else key + "/".
 * -ENAMETOOLONG when it does not fit @cap. */
int smuxfs_dir_prefix(const char *key, char *out, size_t cap);
/* Whether a file opened now keeps the st_ino it shows first for as long
 * as it is open (smuxfs_ofile_attr.ino_id): where the tree may keep more
 * than one copy of a file (no SMUX_CAP_ONE_COPY), decided at its open. On
 * one copy a changed identity is a file replaced behind the mount, which
 * a program must see (tail -F). */
bool smuxfs_pin_ino(struct smuxfs *fs);
/* What the kernel is told of @key's identity: @info->file_id, or the
 * number its open file keeps (smuxfs_pin_ino). Only for replies: inside
 * the daemon a file's identity is the backend's. */
void smuxfs_shown_ino(struct smuxfs *fs, const char *key,
		      struct smux_info *info);

/*
 * What a path's key is: a directory (the root, an object the backend
 * calls a directory, a marker or an implied directory "key/") or a file
 * (an object, or a file open through the mount and not yet committed).
 * Fills @info when not NULL. 0 or a negative errno (-ENOENT).
 */
int smuxfs_lookup(struct smuxfs *fs, const char *key, bool is_root,
		  bool *is_dir, struct smux_info *info);
/* smuxfs_lookup of a file the caller has open as @of, whose attributes
 * it just took (@a): they are not taken again when @of is still the
 * open file of @key (a getattr of an open file asked the writer twice). */
int smuxfs_lookup_open(struct smuxfs *fs, const char *key,
		       struct smuxfs_ofile *of,
		       const struct smuxfs_ofile_attr *a, bool *is_dir,
		       struct smux_info *info);
/*
 * Fills @st for a file or directory from backend info (or defaults):
 * permission bits as kept (0000 included; defaults 0755/0644 only when
 * the mode is unknown), the object's owner unless uid=/gid= were given,
 * atime and ctime (mtime when unknown), the link count (2 or 1 when
 * unknown).
 */
void smuxfs_fill_stat(struct smuxfs *fs, struct stat *st, bool is_dir,
		      const struct smux_info *info);

/*
 * The permission bits a new file or directory of the calling process
 * gets from the @mode it asked for: setuid and setgid are dropped unless
 * the caller is root (the daemon never creates them on behalf of an
 * unprivileged caller). Only the bits 07777 are returned.
 */
mode_t smuxfs_caller_mode(struct smuxfs *fs, mode_t mode);
/*
 * Completes @po for the new object @key (@is_dir: a directory) created by
 * the calling process: when the daemon runs as root and the root keeps
 * owners (SMUX_CAP_OWNER), SMUX_PUT_OWNER with the caller's uid and gid,
 * or the parent directory's group when that one is setgid (as the kernel
 * does); a directory in a setgid directory gets setgid in po->mode. Sets
 * SMUX_PUT_MODE: po->mode is meant as given (0000 stays 0000). Call with
 * po->mode already filled (smuxfs_caller_mode). Costs a lookup of the
 * parent directory.
 */
void smuxfs_caller_owner(struct smuxfs *fs, const char *key, bool is_dir,
			 struct smux_put_opts *po);
/*
 * Whether the root's in-place writer says at open which group its
 * directory gives a new file (SMUX_CAP_DIR_GROUP, smux_writer.dir_group):
 * a create then completes its owner with smuxfs_caller_owner_group once
 * the writer is open, instead of a lookup of the directory first.
 */
bool smuxfs_writer_dir_group(struct smuxfs *fs);
/*
 * smuxfs_caller_owner for a new regular file whose directory gives the
 * group @dir_group (SMUX_ID_NONE: not set-group-ID; the caller's group).
 * Costs no backend call.
 */
void smuxfs_caller_owner_group(struct smuxfs *fs, uint32_t dir_group,
			       struct smux_put_opts *po);
/*
 * The group @key's directory gives new objects (set-group-ID), or
 * SMUX_ID_NONE, asked of the backends (a head of the directory; never
 * the open-file table, so it may be called with an ofile's lock held).
 */
uint32_t smuxfs_dir_group(struct smuxfs *fs, const char *key);

/* @ns since the epoch as a timespec. */
void smuxfs_timespec(int64_t ns, struct timespec *ts);

/* Raises the mount's read-ahead to 8 MiB once (root only; a failure is
 * logged at debug level and ignored). */
void smuxfs_raise_readahead(struct smuxfs *fs);

/* The operations table (ops.c); init/destroy included. */
extern const struct fuse_operations smuxfs_ops;

/* Operations, by file. */
/* ops_access.c: ACCESS on a mount without default_permissions. */
/* Whether the caller of @c is in group @gid (primary or supplementary;
 * ops_access.c). */
bool smuxfs_caller_in_group(const struct fuse_context *c, gid_t gid);
int smuxfs_access(const char *path, int mask);
int smuxfs_getattr(const char *path, struct stat *st,
		   struct fuse_file_info *fi);
int smuxfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		   off_t off, struct fuse_file_info *fi,
		   enum fuse_readdir_flags flags);
int smuxfs_mkdir(const char *path, mode_t mode);
int smuxfs_rmdir(const char *path);
int smuxfs_unlink(const char *path);
int smuxfs_rename(const char *from, const char *to, unsigned int flags);
/* Finishes the key-by-key move of directory @from to @to that a crash
 * interrupted (ops_meta.c): 0 or a negative errno. */
int smuxfs_rename_dir_redo(struct smuxfs *fs, const char *from, const char *to);
/* Makes the record of the key-by-key rename of @from to @to durable in
 * state_dir before the first key moves: 0, or -ENOSPC/-EIO (logged; do
 * not rename then). */
int smuxfs_rjournal_begin(struct smuxfs *fs, const char *from, const char *to,
			  struct smuxfs_rjournal *rec);
/* Removes the record once the move is over (done or failed). */
void smuxfs_rjournal_end(struct smuxfs *fs, const struct smuxfs_rjournal *rec);
/* At mount, before serving: finishes every rename a record names, oldest
 * first, and logs each. 0, or -EAGAIN when a record is left (logged). */
int smuxfs_rjournal_recover(struct smuxfs *fs);

/*
 * Writers kept between opens (linger.c). An in-place writer of one copy,
 * its last handle closed clean, kept open a moment for the next open of
 * its key (`echo >> log` in a loop) while inotify says its name still
 * holds its file. start: before serving (fs->linger NULL when it cannot:
 * off). watch: right after a writer opened its file by name, the watch of
 * that file (-1: none, so never kept). offer: true when @w (of @key, with
 * a passthrough descriptor, watched as @wd since its open) is kept, with
 * the registration *@reg of its file (NULL or none: nothing; moved out
 * when kept); false leaves both to the caller; the watch is ended either
 * way. take: the writer kept for @key, its watch in *@wd and its
 * registration in *@reg (NULL: closed), NULL when none was kept (or it
 * expired, or its file was unlinked, replaced, moved or its attributes
 * changed since its open); whatever drops a kept writer closes its
 * registration with it. unwatch: ends the watch of a writer closed
 * without an offer. drop_all: closes every kept writer, and no open one is
 * kept (a rename through the mount). count: how many are kept. stop:
 * after the last request.
 */
int smuxfs_linger_start(struct smuxfs *fs);
int smuxfs_linger_watch(struct smuxfs *fs, struct smux_writer *w);
bool smuxfs_linger_offer(struct smuxfs *fs, const char *key,
			 struct smux_writer *w, int wd,
			 struct smuxfs_pt_reg *reg);
struct smux_writer *smuxfs_linger_take(struct smuxfs *fs, const char *key,
				       int *wd, struct smuxfs_pt_reg *reg);
void smuxfs_linger_unwatch(struct smuxfs *fs, int wd);
void smuxfs_linger_drop_all(struct smuxfs *fs);
/* A member whose file backend is at @path, not on a local disk, joined
 * the tree (reload, `.smux/ctl add`): nothing is kept from now on, until
 * the next mount (logged once). */
void smuxfs_linger_off(struct smuxfs *fs, const char *path);
unsigned smuxfs_linger_count(struct smuxfs *fs);
void smuxfs_linger_stop(struct smuxfs *fs);
/* Test hook: how long a writer is kept (ns; 200 ms). */
extern _Atomic int64_t smuxfs__linger_ns;

/*
 * The delete queue (delq.c): unlinks on object stores acknowledged once
 * journaled and queued, sent in batches. start (before the tree is
 * served: also deletes what a crashed run's journal names) decides from
 * delete_batch and the tree whether it runs (fs->delq NULL: off); stop
 * (after the last request) sends what is queued.
 *
 * add: 0 when @key is queued (gone for this mount), 1 when the caller
 * must delete it itself (off, unmounting, no memory, the journal cannot
 * be written). has: whether @key is queued. wait: until no delete of
 * @key (when not NULL) or under @prefix (when not NULL; "" = all) is
 * queued, or one of them failed since: 0 or that failure's errno.
 */
int smuxfs_delq_start(struct smuxfs *fs);
void smuxfs_delq_stop(struct smuxfs *fs);
int smuxfs_delq_add(struct smuxfs *fs, const char *key);
bool smuxfs_delq_has(struct smuxfs *fs, const char *key);
int smuxfs_delq_wait(struct smuxfs *fs, const char *key, const char *prefix);
void smuxfs_delq_counts(struct smuxfs *fs, struct smuxfs_delq_counts *c);
int smuxfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi);
int smuxfs_chown(const char *path, uid_t uid, gid_t gid,
		 struct fuse_file_info *fi);
int smuxfs_utimens(const char *path, const struct timespec tv[2],
		   struct fuse_file_info *fi);
int smuxfs_statfs(const char *path, struct statvfs *st);
int smuxfs_mknod(const char *path, mode_t mode, dev_t rdev);
int smuxfs_symlink(const char *target, const char *path);
int smuxfs_readlink(const char *path, char *buf, size_t size);
int smuxfs_link(const char *from, const char *to);
int smuxfs_opendir(const char *path, struct fuse_file_info *fi);
/* A directory (or file) @from was renamed to @to / the directory @path was
 * removed: open directory handles follow (FUSE paths; ops_dir.c). */
void smuxfs_dirfh_renamed(const char *from, const char *to);
/* After an exchange of the paths @a and @b: open directory handles of
 * each (and below it) name the other. */
void smuxfs_dirfh_exchanged(const char *a, const char *b);
void smuxfs_dirfh_removed(struct smuxfs *fs, const char *path,
			  const struct smux_info *was);
/* True when a directory handle is open on @path. */
bool smuxfs_dirfh_open(const char *path);
int smuxfs_releasedir(const char *path, struct fuse_file_info *fi);
int smuxfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi);

int smuxfs_open(const char *path, struct fuse_file_info *fi);
int smuxfs_create(const char *path, mode_t mode, struct fuse_file_info *fi);
int smuxfs_read(const char *path, char *buf, size_t size, off_t off,
		struct fuse_file_info *fi);
int smuxfs_write(const char *path, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
int smuxfs_truncate(const char *path, off_t size, struct fuse_file_info *fi);
int smuxfs_fallocate(const char *path, int mode, off_t off, off_t len,
		     struct fuse_file_info *fi);
int smuxfs_flush(const char *path, struct fuse_file_info *fi);
int smuxfs_fsync(const char *path, int datasync, struct fuse_file_info *fi);
int smuxfs_release(const char *path, struct fuse_file_info *fi);
int smuxfs_poll(const char *path, struct fuse_file_info *fi,
		struct fuse_pollhandle *ph, unsigned *reventsp);

/* Extended attributes (ops_xattr.c): registered only when the mount keeps
 * them ([mount] xattr, smuxfs_ops_for). */
int smuxfs_getxattr(const char *path, const char *name, char *value,
		    size_t size);
int smuxfs_setxattr(const char *path, const char *name, const char *value,
		    size_t size, int flags);
int smuxfs_listxattr(const char *path, char *list, size_t size);
int smuxfs_removexattr(const char *path, const char *name);
/* Fills @ops with smuxfs_ops, without the xattr operations unless @xattr
 * (libfuse then answers ENOSYS once and the kernel stops asking). */
void smuxfs_ops_for(struct fuse_operations *ops, bool xattr);

/* ---- the .smux/ virtual directory (smuxdir.c) ---- */

#define SMUXFS_DIR_NAME ".smux"

/* ---- .smux/events (eventlog.c) ---- */

struct smuxfs_eventlog;

/* Subscribes the ring of recent events to fs->events: 0 or -errno. */
int smuxfs_eventlog_start(struct smuxfs *fs);
/* Unsubscribes and frees (before the bus is freed). */
void smuxfs_eventlog_stop(struct smuxfs *fs);
/* The length of the event stream so far (the file's size). */
uint64_t smuxfs_eventlog_size(struct smuxfs *fs);
/* Reads the stream at @off for reader @fh: bytes copied (0 at its end). */
long smuxfs_eventlog_read(struct smuxfs *fs, struct smuxfs_fh *fh, char *buf,
			  size_t size, uint64_t off);
/* poll(2) of reader @fh: POLLIN when it has more to read; else @ph (taken)
 * is notified when a line is added. */
unsigned smuxfs_eventlog_poll(struct smuxfs *fs, struct smuxfs_fh *fh,
			      struct fuse_pollhandle *ph);
/* Forgets reader @fh's poll handle (at release). */
void smuxfs_eventlog_close(struct smuxfs *fs, struct smuxfs_fh *fh);
/* Adds a line the daemon makes (a JSON object with "topic"; "at" and
 * "seq" are added) to the stream. @j stays the caller's. */
void smuxfs_eventlog_note(struct smuxfs *fs, json_t *j);
/* Test hooks (NULL/unused in production): when set, called for each
 * waiting reader's poll handle instead of fuse_notify_poll and
 * fuse_pollhandle_destroy; and whether the ring's lock is held now. */
extern void (*smuxfs__evlog_notify_hook)(struct fuse_pollhandle *ph);
bool smuxfs__eventlog_locked(struct smuxfs *fs);

/* ---- events in the log (evsyslog.c) ---- */

/* The syslog level of an event of topic @t: LOG_WARNING for what an
 * operator must see, LOG_NOTICE for changes, LOG_INFO for the routine. */
int smuxfs_event_level(enum smux_topic t);
/* The bus subscriber that logs every event (rate-limited). */
void smuxfs_log_event(void *arg, const struct smux_event *ev);

/* ---- event_webhook (webhook.c) ---- */

/* POSTs every event to @url (NULL: none) from a thread: 0 or -errno. */
int smuxfs_webhook_start(struct smuxfs *fs, const char *url);
/* Sends what is queued and stops. */
void smuxfs_webhook_stop(struct smuxfs *fs);

/* ---- tracing export (otlp.c) ---- */

/* Starts the OTLP/HTTP exporter to @endpoint (NULL: none): 0 or -errno. */
int smuxfs_otlp_start(struct smuxfs *fs, const char *endpoint);
/* The tracer to give the muxes, or NULL without an exporter. */
const struct smux_tracer *smuxfs_otlp_tracer(struct smuxfs *fs);
/* Sends what is queued and stops (after every mux is gone). */
void smuxfs_otlp_stop(struct smuxfs *fs);

/* ---- live reload (reload.c) ---- */

/* Reads the config file again and applies the difference: 0, or a
 * negative errno with @why (nothing changed unless it says so). */
int smuxfs_reload(struct smuxfs *fs, char *why, size_t cap);
/* SIGHUP reloads (a thread of reload.c does it): 0 or -errno. */
int smuxfs_reload_start(struct smuxfs *fs);
void smuxfs_reload_stop(struct smuxfs *fs);

/* ---- .smux/ctl (ctl.c) ---- */

/* The backend named @name in the tree under @root (itself included), or
 * the mux holding a member @name: a new reference, or NULL. */
struct smux_backend *smuxfs_tree_backend(struct smux_backend *root,
					 const char *name);
struct smux_backend *smuxfs_tree_owner(struct smux_backend *root,
				       const char *name);

/* 0 when user @caller may write commands (root, the mounting user), else
 * -EACCES. */
int smuxfs_ctl_may_open(struct smuxfs *fs, uid_t caller);
/* Carries out the command lines in @buf: @size, or the first failing
 * command's negative errno (logged, and a line in .smux/events). */
long smuxfs_ctl_write(struct smuxfs *fs, const char *buf, size_t size);

/* ---- .smux/metrics (metrics.c) ---- */

/* The mount's stats in the Prometheus text format, in a new heap buffer
 * *@data of *@len bytes: 0 or -ENOMEM. */
int smuxfs_metrics_render(struct smuxfs *fs, char **data, size_t *len);

/* True for "/.smux" and everything under it. */
bool smuxdir_owns(const char *path);
/* getattr of "/.smux" or a file in it: 0 or -ENOENT. */
int smuxdir_getattr(struct smuxfs *fs, const char *path, struct stat *st);
/* readdir of "/.smux". */
int smuxdir_readdir(struct smuxfs *fs, const char *path, void *buf,
		    fuse_fill_dir_t filler);
/* open of a file in .smux/: snapshots its content into a new handle. */
int smuxdir_open(struct smuxfs *fs, const char *path,
		 struct fuse_file_info *fi);

#endif /* SMUX_FS_FS_H */
