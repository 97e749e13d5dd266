/* SPDX-License-Identifier: MIT */
/*
 * config.h - the smuxfs configuration file (DESIGN section 6): an INI file
 * read with inih, with sections [mount], [mux NAME] and [backend NAME].
 *
 * Owns: parsing, validation (every error names the file, the line, the
 * section and the offending key or value), mount options given with -o,
 * building the backend tree through libsmux, and the two renderings of the
 * result (the tree for `smuxfs --check-config`, redacted JSON for
 * .smux/config). Never touches FUSE.
 *
 * Durations take units (500ms, 30s, 5m, 1h; a bare number is seconds);
 * sizes take units (4096, 64K, 64M, 10G; powers of 1024). Booleans are
 * true/false, yes/no, on/off, 1/0. Unknown sections and keys are errors.
 * Secrets come from files (`credentials_file = PATH`) or the environment
 * (`credentials_env = NAME`), never inline; they are never printed.
 */
#ifndef SMUX_FS_CONFIG_H
#define SMUX_FS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "smux/backend.h"
#include "smux/events.h"
#include "smux/mux.h"

/* A setting that is on, off, or decided by the tree (read_cache). */
enum smux_fs_auto {
	SMUX_FS_AUTO = 0,
	SMUX_FS_OFF,
	SMUX_FS_ON,
};

/* What [mount] and -o set. Strings are owned by the config. */
struct smux_fs_opts {
	char *root;	 /* the [mux] or [backend] mounted at / (required) */
	char *cache_dir; /* staging and read cache; default below */
	char *state_dir; /* hint journals; default below */
	char *prefix;	 /* key prefix under which the tree lives ("") */
	double attr_timeout;	 /* seconds the kernel caches attributes (1) */
	double entry_timeout;	 /* seconds it caches names (1) */
	double negative_timeout; /* seconds it caches "no such name" (1) */
	/* seconds the daemon keeps a directory's complete list of names on
	 * object stores (dirnames.c; SMUX_FS_DEFAULT_DIR_CACHE_TIMEOUT) */
	double dir_cache_timeout;
	uint64_t cache_size; /* bytes of read cache (1G) */
	/* bytes of read-ahead gets queued or in flight at once, over all
	 * open files (SMUX_FS_DEFAULT_READ_AHEAD; 0 = none) */
	uint64_t read_ahead;
	/* where read_ahead was given: 0 not (the default, clamped to half
	 * of cache_size quietly), -1 by -o, else its line in the file */
	int read_ahead_line;
	/* the read cache: on, off, or auto = on with a network backend in
	 * the tree (smux_config_has_network) */
	enum smux_fs_auto read_cache;
	/* extended attributes (user.*): on, off (the kernel is told
	 * ENOSYS once and stops asking), or auto = on when the root can
	 * keep them (SMUX_CAP_XATTR) */
	enum smux_fs_auto xattr;
	/* FUSE passthrough (passthrough.c): the kernel reads and writes a
	 * file written in place on one copy directly. auto and on: where
	 * the kernel and the daemon's privileges allow; off: every read and
	 * write through the daemon (each bounded by backend_timeout) */
	enum smux_fs_auto passthrough;
	/* unlinks on object stores acknowledged once queued and sent in
	 * batches (delq.c): auto = when every backend deletes in batches
	 * (SMUX_CAP_DEL_MANY), on = on any tree without a local directory
	 * (key by key, in parallel, where there is no batch), off */
	enum smux_fs_auto delete_batch;
	char *otlp_endpoint; /* spans go to ENDPOINT/v1/traces; NULL: none */
	char *event_webhook; /* every event POSTed there; NULL: none */
	/* the deadline of each call to a root that is a single backend
	 * (wrapped in a one-member failover mux, so it gets a bulkhead like
	 * any mux member); a mux root has its own backend_timeout (30s) */
	uint64_t backend_timeout_ms;
	bool allow_other;
	/* asked for explicitly (-o default_permissions, or true in
	 * [mount]); smux_fs_default_permissions() says what applies */
	bool default_permissions;
	/* the operator's explicit opt-out (default_permissions = false in
	 * [mount], -o no_default_permissions): allow_other without the
	 * kernel's permission checks */
	bool no_default_permissions;
	bool ro;
	bool has_uid, has_gid, has_umask;
	uid_t uid;
	gid_t gid;
	mode_t umask;
};

#define SMUX_FS_DEFAULT_CACHE_DIR "/var/cache/smuxfs"
#define SMUX_FS_DEFAULT_STATE_DIR "/var/lib/smuxfs"

/* [mount] read_ahead when not given: 64 MiB */
#define SMUX_FS_DEFAULT_READ_AHEAD (64ULL << 20)
/* dir_cache_timeout: goofys keeps a directory 1 min, rclone 5 min, s3fs
 * 15 min; the shortest of them, as a mount here is often one writer of
 * several (a mirror, another daemon on the same bucket), and a listing
 * again after a minute costs one request per directory */
#define SMUX_FS_DEFAULT_DIR_CACHE_TIMEOUT 60.0

struct smux_config;

/*
 * Reads and validates @path. On failure returns a negative errno and
 * writes one line into @errbuf ("PATH:LINE: [backend edge-a] type:
 * unknown type \"s4\" (use file, memory, faulty, http, s3, swift or bunny)"). *@out is owned by
 * the caller (smux_config_free).
 */
int smux_config_load(const char *path, struct smux_config **out, char *errbuf,
		     size_t errlen);
void smux_config_free(struct smux_config *cfg);

/* The mount options (after smux_config_mount_opt overrides). */
struct smux_fs_opts *smux_config_opts(struct smux_config *cfg);

/*
 * Whether the kernel checks permissions (FUSE default_permissions): when
 * asked for, and always with allow_other unless the operator opted out
 * explicitly (@o->no_default_permissions) - every local user would
 * otherwise get the daemon's rights over every file.
 */
bool smux_fs_default_permissions(const struct smux_fs_opts *o);

/*
 * Applies one -o option KEY[=VALUE] that belongs to smuxfs (cache_dir=,
 * state_dir=, attr_timeout=, entry_timeout=, negative_timeout=,
 * dir_cache_timeout=, cache_size=, read_cache=, xattr=, backend_timeout=, uid=, gid=, umask=,
 * allow_other, default_permissions, no_default_permissions, ro, rw).
 * Returns 1 when applied, 0 when the option is not smuxfs's (the caller
 * passes it to FUSE or ignores it), or
 * a negative errno with @errbuf saying "option KEY: reason".
 */
int smux_config_mount_opt(struct smux_config *cfg, const char *opt,
			  char *errbuf, size_t errlen);

/* True for options fstab passes that a FUSE daemon must ignore: _netdev,
 * nofail, noauto, auto, user, users, nouser, defaults, x-systemd.*,
 * x-gvfs-*, comment=*. */
bool smux_config_ignored_opt(const char *opt);

/*
 * Builds every backend and mux of the tree under the root (muxes get
 * @events, which may be NULL, and state_dir as their hint directory). A
 * root that is a single backend comes back wrapped in a one-member
 * failover mux of the same name with [mount] backend_timeout, so every
 * call to it has a deadline and a bulkhead (a hung directory never hangs
 * a FUSE request or the unmount).
 * Returns 0 and one reference on the root in *@root, or a negative errno
 * with @errbuf naming the section and the reason (a missing file backend
 * directory, a mux cycle, ...).
 */
int smux_config_build(struct smux_config *cfg, struct smux_events *events,
		      struct smux_backend **root, char *errbuf, size_t errlen);

/* Every mux built from @cfg from now on gets @tracer (otlp.c). */
void smux_config_set_tracer(struct smux_config *cfg,
			    const struct smux_tracer *tracer);

/*
 * Builds the section @name of the loaded config @cfg (a [backend] or a
 * [mux] and what it needs) with @cfg's mount options, for `add NAME` and
 * reload at run time: @out gets one reference on it and the weight the
 * section gives it. 0, or a negative errno with @errbuf naming the file,
 * line and reason (-ENOENT: no such section). The running tree is not
 * touched; @cfg can build again afterwards.
 */
int smux_config_build_member(struct smux_config *cfg, const char *name,
			     struct smux_events *events,
			     const struct smux_tracer *tracer,
			     struct smux_mux_member *out, char *errbuf,
			     size_t errlen);

/*
 * `add` of section @added to the running mirror or shield @mux, whose
 * members are the sections @members (@n): refused when a section below
 * @added is one a member reaches already (the directory behind a faulty
 * member, a wrapper of a member, a mux over one) - every write would be
 * made on it twice, as the load refuses (smux__cfg_check). 0, or -EINVAL
 * with @errbuf naming both, the file and @added's line.
 */
int smux_config_check_added_reach(struct smux_config *cfg, const char *added,
				  const char *mux, const char *const *members,
				  unsigned n, char *errbuf, size_t errlen);

/* What `add` adds to a running tree (smux_config_check_dirs). */
struct smux_config_added {
	const char *name; /* the section added */
	bool replicated;  /* its mux writes every member (mirror, shield) */
	/* whether a section of that name is in the running tree */
	bool (*running)(const char *name, void *arg);
	void *arg;
};

/*
 * Refuses local directories of one mount that overlap (config_dirs.c):
 * two file backends on one directory that one write reaches both of (a
 * mirror or shield above them), a file backend inside another, cache_dir
 * or state_dir inside a file backend or one inside them, a file backend
 * holding the mount point or under it, cache_dir or state_dir under the
 * mount point. @mountpoint may be NULL (not compared). With @added NULL
 * every directory of @cfg's tree is compared; with @added the file
 * backends of that section only, against those of the running tree's
 * sections and the daemon's directories. 0, or -EINVAL (-ENOMEM) with
 * @errbuf naming both keys, the line and the directories.
 */
int smux_config_check_dirs(const struct smux_config *cfg,
			   const struct smux_config_added *added,
			   const char *mountpoint, char *errbuf, size_t errlen);

/* A read_ahead given (file or -o) above half of cache_size: an error
 * naming read_ahead, where it was given, and the most it may be (the
 * read cache keeps half for readers). -EINVAL or 0. */
int smux_config_check_read_ahead(const struct smux_config *cfg, char *errbuf,
				 size_t errlen);
/*
 * `--check-config`: every file backend of the tree names a directory that
 * opens (what the mount would find), else -EINVAL (or the errno) with
 * @errbuf naming the key, its line and why.
 */
int smux_config_check_paths(const struct smux_config *cfg, char *errbuf,
			    size_t errlen);

/* Whether a mux of @mode and @members members records repair hints (and
 * claims its file directories): every mode but round-robin and weighted,
 * two members or more. */
bool smux_mode_keeps_hints(enum smux_mode mode, unsigned members);
/*
 * Claims, for the daemon's lifetime, every file backend directory under a
 * mux that keeps repair hints (smux_mode_keeps_hints): an exclusive flock
 * on the directory (replica_lock.c). A directory another daemon holds so
 * is waited for a few seconds, then -EBUSY with @errbuf naming the key,
 * its line and the other daemon's pid. What this process holds already
 * is skipped.
 */
int smuxfs_replica_claim(const struct smux_config *cfg, char *errbuf,
			 size_t errlen);
/* The same for member @name's tree, added at run time under a mux that
 * keeps hints. */
int smuxfs_replica_claim_member(const struct smux_config *cfg, const char *name,
				char *errbuf, size_t errlen);

/*
 * Refuses a file backend whose path is the mount point @mnt (resolved) or
 * lies under it, at run time (reload: every backend of the tree; @added:
 * that section's): the daemon would write through its own mount. Never
 * looks anything up under @mnt (that would come back to the daemon):
 * paths are resolved here, symlink by symlink, up to it. 0, or -EINVAL
 * with @errbuf naming the key and its line.
 */
int smux_config_check_under_mount(const struct smux_config *cfg,
				  const char *added, const char *mnt,
				  char *errbuf, size_t errlen);

/*
 * Gives @dst the mount options of @src (deep copy): a file loaded again at
 * run time gets what the mount runs with, -o options included
 * (config_opts.c). 0 or -ENOMEM (@dst unchanged).
 */
int smux_config_copy_opts(struct smux_config *dst,
			  const struct smux_config *src);

/*
 * The resolved tree as text for `smuxfs --check-config`, e.g.
 *   media: mux shield (backend_timeout 30s, ...)
 *     origin: file /srv/media
 *     edge-a: s3 http://127.0.0.1:9000 bucket media
 * Caller frees. NULL on ENOMEM.
 */
char *smux_config_describe(struct smux_config *cfg);

/* True when every backend of the tree is a file backend (directly or
 * under faulty) and no mux is in failover or shield mode: directories are
 * real there and every member answers for them, so the daemon need not
 * look for "dir/" marker objects when a key is missing. */
bool smux_config_real_dirs(const struct smux_config *cfg);

/* True when the mounted tree contains a backend reached over a network
 * (s3, http, swift, bunny; none is available in this build yet), which
 * turns read_cache = auto on. */
bool smux_config_has_network(const struct smux_config *cfg);

/* True when the mounted tree contains a local directory (type file):
 * its readers keep the file open (an unlinked name still reads), which
 * the daemon's attribute cache must not replace (attrcache.c). */
bool smux_config_has_file(const struct smux_config *cfg);

/* The path of a file backend of the mounted tree that is not on a local
 * disk (NFS, SMB, a FUSE filesystem, ...: statfs), or that cannot be
 * asked; NULL when every one is local. Another host's changes there are
 * not reported by inotify (linger.c). */
const char *smux_config_remote_file(const struct smux_config *cfg);
/* The same for the section @name of @cfg and what it holds (a member
 * `.smux/ctl add` brings in). */
const char *smux_config_remote_file_in(const struct smux_config *cfg,
				       const char *name);

/* True when the mounted tree contains an http (WebDAV) backend: a server
 * with real directories, whose mtimes move with their entries. */
bool smux_config_has_http(const struct smux_config *cfg);
/* True when a bunny backend is in the tree. */
bool smux_config_has_bunny(const struct smux_config *cfg);

/* The effective configuration as pretty JSON, secrets redacted ("***"),
 * for .smux/config. Caller frees. NULL on ENOMEM. */
char *smux_config_json(struct smux_config *cfg);

#endif /* SMUX_FS_CONFIG_H */
