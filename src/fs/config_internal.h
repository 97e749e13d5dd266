/* SPDX-License-Identifier: MIT */
/*
 * config_internal.h - what the config modules share (never included outside
 * src/fs/config_*.c and tests/unit/test_config.c).
 *
 * A loaded file is a list of sections in file order. Each section keeps
 * every key it set as a typed value with the line it came from, so any
 * later check (the graph checks, the build) can name the exact line.
 *
 *   config.c         the key tables, mount options (-o), free
 *   config_parse.c   reading the file through inih, per-key parsing
 *   config_check.c   per-section and whole-file checks: required keys,
 *                    names, weights, cycles, depth
 *   config_value.c   value syntax: durations, sizes, booleans, ids, ...
 *   config_build.c   the backend tree through libsmux
 *   config_render.c  the text tree and the redacted JSON
 */
#ifndef SMUX_FS_CONFIG_INTERNAL_H
#define SMUX_FS_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/config.h"

/* A section name: [A-Za-z0-9._-]{1,63}, not starting with '.'. */
#define SMUX__CFG_NAME_MAX 63
/* The longest duration accepted: 365 days. */
#define SMUX__CFG_DURATION_MAX_MS (365LL * 24 * 3600 * 1000)
/* write_quorum and max_inflight stay below this. */
#define SMUX__CFG_COUNT_MAX 1000000u
/* Longest path of sections (mux members, faulty wraps) from any section. */
#define SMUX__CFG_CHAIN_MAX 64
/* Config files larger than this are refused. */
#define SMUX__CFG_FILE_MAX (1u << 20)

enum smux__cfg_kind {
	SMUX__CFG_MOUNT,
	SMUX__CFG_MUX,
	SMUX__CFG_BACKEND,
};

/* Backend types; the ones after FAULTY but HTTP are recognised, not
 * available. */
enum smux__cfg_type {
	SMUX__CFG_T_NONE,
	SMUX__CFG_T_FILE,
	SMUX__CFG_T_MEMORY,
	SMUX__CFG_T_FAULTY,
	SMUX__CFG_T_S3,
	SMUX__CFG_T_HTTP,
	SMUX__CFG_T_SWIFT,
	SMUX__CFG_T_BUNNY,
	SMUX__CFG_T_COUNT
};

/* How a key's value is written. */
enum smux__cfg_vt {
	SMUX__VT_DURATION, /* .i: milliseconds */
	SMUX__VT_SIZE,	   /* .u: bytes */
	SMUX__VT_BOOL,	   /* .b */
	SMUX__VT_COUNT,	   /* .u: 1 .. SMUX__CFG_COUNT_MAX */
	SMUX__VT_U64,	   /* .u: any unsigned 64-bit number */
	SMUX__VT_RATE,	   /* .d: 0 .. 1 */
	SMUX__VT_WEIGHT,   /* .d: finite, >= 0 */
	SMUX__VT_STRING,   /* .s: any non-empty text */
	SMUX__VT_ABSPATH,  /* .s: an absolute path */
	SMUX__VT_NAME,	   /* .s: a section name */
	SMUX__VT_NAMES,	   /* section->members */
	SMUX__VT_MODE,	   /* .i: enum smux_mode */
	SMUX__VT_TYPE,	   /* .i: enum smux__cfg_type */
	SMUX__VT_UID,	   /* .u: uid_t */
	SMUX__VT_GID,	   /* .u: gid_t */
	SMUX__VT_UMASK,	   /* .u: mode_t */
	SMUX__VT_PREFIX,   /* .s: a key prefix, may be empty */
	SMUX__VT_AUTO,	   /* .i: enum smux_fs_auto (auto or a boolean) */
};

/* Keys of [mount]. */
enum {
	SMUX__MK_ROOT,
	SMUX__MK_CACHE_DIR,
	SMUX__MK_STATE_DIR,
	SMUX__MK_PREFIX,
	SMUX__MK_ATTR_TIMEOUT,
	SMUX__MK_ENTRY_TIMEOUT,
	SMUX__MK_NEGATIVE_TIMEOUT,
	SMUX__MK_DIR_CACHE_TIMEOUT,
	SMUX__MK_CACHE_SIZE,
	SMUX__MK_ALLOW_OTHER,
	SMUX__MK_DEFAULT_PERMISSIONS,
	SMUX__MK_RO,
	SMUX__MK_UID,
	SMUX__MK_GID,
	SMUX__MK_UMASK,
	SMUX__MK_READ_CACHE,
	SMUX__MK_READ_AHEAD,
	SMUX__MK_BACKEND_TIMEOUT,
	SMUX__MK_XATTR,
	SMUX__MK_PASSTHROUGH,
	SMUX__MK_DELETE_BATCH,
	SMUX__MK_OTLP_ENDPOINT,
	SMUX__MK_EVENT_WEBHOOK,
	SMUX__MK_COUNT
};

/* Keys of [mux NAME]. */
enum {
	SMUX__XK_MODE,
	SMUX__XK_BACKENDS,
	SMUX__XK_BACKEND_TIMEOUT,
	SMUX__XK_COOLDOWN,
	SMUX__XK_MAX_COOLDOWN,
	SMUX__XK_HEALTHCHECK_INTERVAL,
	SMUX__XK_WRITE_QUORUM,
	SMUX__XK_THROW_ON_FANOUT_PARTIAL,
	SMUX__XK_MAX_INFLIGHT,
	SMUX__XK_WEIGHT,
	SMUX__XK_COUNT
};

/* Keys of [backend NAME]. */
enum {
	SMUX__BK_TYPE,
	SMUX__BK_WEIGHT,
	SMUX__BK_PATH,
	SMUX__BK_NO_FSYNC,
	SMUX__BK_WRAPS,
	SMUX__BK_LATENCY,
	SMUX__BK_HANG_RATE,
	SMUX__BK_ERROR_RATE,
	SMUX__BK_SEMANTIC_RATE,
	SMUX__BK_TIMEOUT_RATE,
	SMUX__BK_HANG,
	SMUX__BK_SEED,
	SMUX__BK_FAULT_AFTER,
	SMUX__BK_FAULT_FOR,
	SMUX__BK_ENDPOINT,
	SMUX__BK_BUCKET,
	SMUX__BK_REGION,
	SMUX__BK_PREFIX,
	SMUX__BK_PATH_STYLE,
	SMUX__BK_URL,
	SMUX__BK_WEBDAV,
	SMUX__BK_CREDENTIALS_FILE,
	SMUX__BK_CREDENTIALS_ENV,
	SMUX__BK_ZONE,
	SMUX__BK_MAX_CONCURRENCY,
	/* http and bunny: symlinks as NAME.rclonelink objects */
	SMUX__BK_RCLONE_LINKS,
	/* swift */
	SMUX__BK_AUTH_URL,
	SMUX__BK_AUTH_VERSION,
	SMUX__BK_CONTAINER,
	SMUX__BK_TENANT,
	SMUX__BK_INTERNAL,
	SMUX__BK_PASSWORD_CREDENTIALS,
	/* the HTTP layer of every network type */
	SMUX__BK_CA_FILE,
	SMUX__BK_CONNECT_TIMEOUT,
	SMUX__BK_IDLE_TIMEOUT,
	/* s3 multipart uploads */
	SMUX__BK_PART_SIZE,
	SMUX__BK_PART_PARALLEL,
	SMUX__BK_MULTIPART_THRESHOLD,
	/* swift large objects */
	SMUX__BK_SEGMENT_THRESHOLD,
	SMUX__BK_SEGMENT_SIZE,
	/* s3 and swift: the attribute cache (core/attrstore.c) */
	SMUX__BK_ATTR_STORE,
	SMUX__BK_ATTR_STORE_MAX,
	SMUX__BK_COUNT
};

#define SMUX__CFG_KEYS_MAX SMUX__BK_COUNT

/* One key a section may set. */
struct smux__cfg_keydef {
	const char *name;
	enum smux__cfg_vt vt;
	unsigned types; /* [backend]: mask of 1 << type taking it; 0 = all */
	bool secret;	/* rendered as "***" */
};

/* One value as set in the file; line 0 = not set. */
struct smux__cfg_value {
	int line;
	union {
		int64_t i;
		uint64_t u;
		double d;
		bool b;
		char *s; /* owned */
	};
};

struct smux__cfg_section {
	enum smux__cfg_kind kind;
	char *name; /* NULL for [mount] */
	int line;   /* of the [header] */
	struct smux__cfg_value v[SMUX__CFG_KEYS_MAX];
	/* the config's mount options (borrowed; they outlive it): a mux
	 * without its own backend_timeout takes the mount's */
	const struct smux_fs_opts *opts;
	char **members; /* [mux] backends, in order (owned) */
	unsigned n_members;

	/* Filled by the whole-file checks (config_check.c). */
	struct smux__cfg_section **member_secs; /* n_members, borrowed */
	struct smux__cfg_section *wraps_sec;	/* [backend] type faulty */
	unsigned depth;				/* muxes below and here */
	unsigned height;			/* sections below (0: leaf) */
	int visit;				/* DFS colour */
	/* the last mux pass that reached it (config_check.c reached_twice)
	 * and through which member of that mux */
	unsigned reach_pass, reach_member;
	bool used; /* reachable from the root */

	/* During smux_config_build only: one reference, or NULL. */
	struct smux_backend *built;
};

struct smux_config {
	char *path;
	struct smux_fs_opts opts;
	struct smux__cfg_section **secs; /* file order, [mount] included */
	unsigned n_secs;
	struct smux__cfg_section *mount; /* NULL only while parsing */
	struct smux__cfg_section *root;	 /* what [mount] root names */
	/* given to every mux built (smux_config_set_tracer); borrowed */
	const struct smux_tracer *tracer;
};

/* The key table of @kind (SMUX__MK/XK/BK_COUNT entries) and its size. */
const struct smux__cfg_keydef *smux__cfg_keys(enum smux__cfg_kind kind,
					      unsigned *n);
/* "file", "memory", ... */
const char *smux__cfg_type_name(enum smux__cfg_type t);
/* "[mount]", "[mux NAME]", "[backend NAME]" into @buf. Returns @buf. */
char *smux__cfg_label(const struct smux__cfg_section *s, char *buf, size_t len);
struct smux_faulty_opts;
/* The fault options of the faulty section @s (config_build.c). */
void smux_config_faulty_opts(const struct smux__cfg_section *s,
			     struct smux_faulty_opts *out);
/* The section named @name, or NULL. */
struct smux__cfg_section *smux__cfg_find(const struct smux_config *cfg,
					 const char *name);

/*
 * Appends "PATH[:LINE]: " and the printf text to @buf (always one line,
 * always NUL-terminated). @line <= 0 leaves the line out. Returns -EINVAL.
 */
int smux__cfg_errorf(char *buf, size_t len, const char *path, int line,
		     const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Checks of one section once it has ended (config_check.c); 0 or -EINVAL
 * with @errbuf. */
int smux__cfg_check_section(const struct smux_config *cfg,
			    const struct smux__cfg_section *s, char *errbuf,
			    size_t errlen);
/* Whole-file checks after a successful parse; 0 or -EINVAL + @errbuf. */
int smux__cfg_check(struct smux_config *cfg, char *errbuf, size_t errlen);
/* Fills cfg->opts from [mount] and the defaults (config.c); 0 or -ENOMEM. */
int smux__cfg_fill_opts(struct smux_config *cfg);

/* ---- value syntax (config_value.c) ----
 * Each parser returns 0, or -EINVAL (-ERANGE for too large) with @why
 * holding the reason, e.g. `invalid duration "3x" (use 500ms, 30s, 5m,
 * 1h)`, ready to follow "KEY: ". */
int smux__cfg_parse_duration(const char *s, int64_t *ms, char *why, size_t len);
int smux__cfg_parse_size(const char *s, uint64_t *bytes, char *why, size_t len);
int smux__cfg_parse_bool(const char *s, bool *b, char *why, size_t len);
int smux__cfg_parse_count(const char *s, uint64_t *n, char *why, size_t len);
int smux__cfg_parse_u64(const char *s, uint64_t *n, char *why, size_t len);
int smux__cfg_parse_rate(const char *s, double *d, char *why, size_t len);
int smux__cfg_parse_weight(const char *s, double *d, char *why, size_t len);
int smux__cfg_parse_uid(const char *s, uid_t *uid, char *why, size_t len);
int smux__cfg_parse_gid(const char *s, gid_t *gid, char *why, size_t len);
int smux__cfg_parse_umask(const char *s, mode_t *m, char *why, size_t len);
int smux__cfg_parse_abspath(const char *s, char *why, size_t len);
/* "auto" or a boolean, as enum smux_fs_auto (config.c). */
int smux__cfg_parse_auto(const char *s, int64_t *v, char *why, size_t len);
/* Checks a prefix and returns it without leading/trailing '/' (heap). */
int smux__cfg_parse_prefix(const char *s, char **out, char *why, size_t len);
/* True for a valid section name. */
bool smux__cfg_name_ok(const char *s, size_t n);
/* True when @n bytes of @s are valid UTF-8. */
bool smux__cfg_utf8_ok(const char *s, size_t n);

/*
 * @s (its first @n bytes) in double quotes with control characters, '"'
 * and '\' escaped, cut to about 80 bytes with "..." - safe to put in a
 * one-line message. Returns @buf.
 */
char *smux__cfg_quote(const char *s, size_t n, char *buf, size_t len);
#define SMUX__CFG_QUOTE_MAX 100

/* 30000 -> "30s", 1500 -> "1500ms", 7200000 -> "2h". Returns @buf. */
char *smux__cfg_fmt_duration(int64_t ms, char *buf, size_t len);
/* 1073741824 -> "1G", 4096 -> "4K", 1000 -> "1000". Returns @buf. */
char *smux__cfg_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Effective [mux] values (defaults filled in; backend_timeout: the
 * mount's, from [mount] or -o, when the mux sets none). */
int64_t smux__cfg_mux_ms(const struct smux__cfg_section *s, int key);
unsigned smux__cfg_mux_count(const struct smux__cfg_section *s, int key);

#endif /* SMUX_FS_CONFIG_INTERNAL_H */
