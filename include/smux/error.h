/* SPDX-License-Identifier: MIT */
/*
 * smux/error.h - the structured error every libsmux operation reports.
 *
 * Owns: the table of error codes (name string, message, class, errno) and
 * the small helpers that fill a struct smux_error. Never allocates: an error
 * is a plain value the caller owns, usually on its stack, so it can be
 * filled from any thread and copied freely.
 *
 * Convention (STYLE.md): functions that act return 0 or a negative errno and
 * describe a failure in an optional `struct smux_error *err` (NULL allowed).
 */
#ifndef SMUX_ERROR_H
#define SMUX_ERROR_H

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * How the mux treats an error (seed section 4).
 *  - ABORT: the caller gave up; never falls through, surfaces as
 *    BACKEND_ABORTED.
 *  - SEMANTIC: the request itself is wrong or the answer is final (not
 *    found, invalid key, 4xx); never falls through, never counts against
 *    health.
 *  - TRANSIENT: the backend may do better later or another backend may
 *    succeed (timeouts, connection errors, 5xx, 408, 429, unknown); falls
 *    through and counts against health.
 *  - LOCAL: the caller's own side failed, not the backend (its sink or
 *    source: ENOSPC in the cache directory or TMPDIR, EIO on a staging
 *    file); never falls through (the next backend would fail the same
 *    way), never counts against health, and surfaces with the local errno
 *    (ENOSPC stays ENOSPC).
 */
enum smux_class {
	SMUX_CLASS_NONE = 0, /* no error */
	SMUX_CLASS_ABORT,
	SMUX_CLASS_SEMANTIC,
	SMUX_CLASS_TRANSIENT,
	SMUX_CLASS_LOCAL,
};

/*
 * Every error code. The name strings keep the seed's spelling
 * ("STORAGE_MUX.ALL_BACKENDS_DOWN"); see smux_code_name().
 */
enum smux_code {
	SMUX_OK = 0,

	/* STORAGE.* - what a single backend reports */
	SMUX_E_KEY_NOT_FOUND,	    /* STORAGE.KEY_NOT_FOUND */
	SMUX_E_INVALID_KEY,	    /* STORAGE.INVALID_KEY */
	SMUX_E_KEY_TOO_LONG,	    /* STORAGE.KEY_TOO_LONG */
	SMUX_E_PERMISSION_DENIED,   /* STORAGE.PERMISSION_DENIED */
	SMUX_E_NOT_EMPTY,	    /* STORAGE.NOT_EMPTY */
	SMUX_E_IS_DIRECTORY,	    /* STORAGE.IS_DIRECTORY */
	SMUX_E_NOT_DIRECTORY,	    /* STORAGE.NOT_DIRECTORY */
	SMUX_E_ALREADY_EXISTS,	    /* STORAGE.ALREADY_EXISTS */
	SMUX_E_PRECONDITION_FAILED, /* STORAGE.PRECONDITION_FAILED */
	SMUX_E_NOT_SUPPORTED,	    /* STORAGE.NOT_SUPPORTED */
	SMUX_E_INVALID_ARGUMENT,    /* STORAGE.INVALID_ARGUMENT */
	SMUX_E_NO_SPACE,	    /* STORAGE.NO_SPACE */
	SMUX_E_NO_MEMORY,	    /* STORAGE.NO_MEMORY */
	SMUX_E_IO,		    /* STORAGE.IO_ERROR */
	SMUX_E_CONNECTION,	    /* STORAGE.CONNECTION_FAILED */
	SMUX_E_HTTP,		    /* STORAGE.HTTP_ERROR (class from status) */
	SMUX_E_BAD_RESPONSE,	    /* STORAGE.BAD_RESPONSE */
	SMUX_E_UNKNOWN,		    /* STORAGE.UNKNOWN */

	/* STORAGE_CDN.* */
	SMUX_E_CREDENTIAL_EXPIRED, /* STORAGE_CDN.CREDENTIAL_EXPIRED */

	/* STORAGE_MUX.* - what the multiplexer reports */
	SMUX_E_ALL_BACKENDS_DOWN,	  /* STORAGE_MUX.ALL_BACKENDS_DOWN */
	SMUX_E_BACKEND_TIMEOUT,		  /* STORAGE_MUX.BACKEND_TIMEOUT */
	SMUX_E_BACKEND_ABORTED,		  /* STORAGE_MUX.BACKEND_ABORTED */
	SMUX_E_BACKEND_DRAINING,	  /* STORAGE_MUX.BACKEND_DRAINING */
	SMUX_E_WRITE_FANOUT_PARTIAL,	  /* STORAGE_MUX.WRITE_FANOUT_PARTIAL */
	SMUX_E_WRITE_QUORUM_FAILED,	  /* STORAGE_MUX.WRITE_QUORUM_FAILED */
	SMUX_E_INVALID_WEIGHT,		  /* STORAGE_MUX.INVALID_WEIGHT */
	SMUX_E_WEIGHTED_REQUIRES_WEIGHTS, /* ..WEIGHTED_REQUIRES_WEIGHTS */
	SMUX_E_BACKEND_NAME_CONFLICT,	 /* STORAGE_MUX.BACKEND_NAME_CONFLICT */
	SMUX_E_BACKEND_NOT_FOUND,	 /* STORAGE_MUX.BACKEND_NOT_FOUND */
	SMUX_E_RECURSION_DEPTH_EXCEEDED, /* ..RECURSION_DEPTH_EXCEEDED */
	SMUX_E_HEALTHCHECK_FAILED,	 /* STORAGE_MUX.HEALTHCHECK_FAILED */
	SMUX_E_MIRROR_ORIGIN_REQUIRED, /* STORAGE_MUX.MIRROR_ORIGIN_REQUIRED */
	SMUX_E_INVALID_OPTIONS,	       /* STORAGE_MUX.INVALID_OPTIONS */
	SMUX_E_HINT_JOURNAL_FAILED,    /* STORAGE_MUX.HINT_JOURNAL_FAILED */

	/* STORAGE.* added later (kept last: the values above do not move) */
	SMUX_E_NO_ATTR, /* STORAGE.NO_ATTRIBUTE: no such extended attribute */
	/* STORAGE.LOCAL_IO_ERROR: the caller's sink or source failed (class
	 * LOCAL; the errno is the local one: ENOSPC, EDQUOT, EIO, EROFS...) */
	SMUX_E_LOCAL_IO,

	SMUX_CODE_COUNT /* number of codes, not a code */
};

#define SMUX_ERROR_NAME_MAX 64
#define SMUX_ERROR_MSG_MAX  256

/* One error without its cause: what a cause chain keeps of an error. */
struct smux_error_info {
	enum smux_code code;
	int sys_errno;			   /* positive errno for FUSE */
	int http_status;		   /* 0 when no HTTP exchange */
	unsigned attempts;		   /* backend attempts made */
	char backend[SMUX_ERROR_NAME_MAX]; /* backend that failed, or "" */
	char message[SMUX_ERROR_MSG_MAX];  /* for people; never a secret */
};

/*
 * An error and, optionally, the error that caused it (one level: for
 * ALL_BACKENDS_DOWN the last backend's error, for a failed shield write the
 * origin's). A zeroed struct means "no error".
 */
struct smux_error {
	struct smux_error_info e;
	bool has_cause;
	struct smux_error_info cause;
};

/* "STORAGE_MUX.ALL_BACKENDS_DOWN" etc.; "STORAGE.UNKNOWN" for bad codes. */
const char *smux_code_name(enum smux_code code);
/* Default human message of a code, e.g. "all backends are down". */
const char *smux_code_message(enum smux_code code);
/* Class of a code (SMUX_E_HTTP depends on the status: smux_error_class). */
enum smux_class smux_code_class(enum smux_code code);
/* Default positive errno of a code (ENOENT, EIO, ...); 0 for SMUX_OK. */
int smux_code_errno(enum smux_code code);
/* Looks up a code by its name string; SMUX_CODE_COUNT when unknown. */
enum smux_code smux_code_from_name(const char *name);
/* "abort", "semantic", "transient", "local" or "none". */
const char *smux_class_name(enum smux_class cls);

/*
 * Fills @err (if not NULL) with @code, the code's errno, the backend name
 * (may be NULL) and a printf-style message (NULL fmt: the code's message).
 * Clears any previous cause. Returns -errno of the code, so a function can
 * `return smux_error_set(err, ...)`.
 */
int smux_error_set(struct smux_error *err, enum smux_code code,
		   const char *backend, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int smux_error_setv(struct smux_error *err, enum smux_code code,
		    const char *backend, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

/*
 * Like smux_error_set for a failed system call: maps @sys_errno to a code
 * (ENOENT -> KEY_NOT_FOUND, ENOSPC -> NO_SPACE, EACCES -> PERMISSION_DENIED,
 * ...) and keeps @sys_errno as the error's errno. The message is
 * "<what>: <strerror>". Returns -errno.
 */
int smux_error_from_errno(struct smux_error *err, int sys_errno,
			  const char *backend, const char *what);

/*
 * Fills @err for an HTTP response status: 404 -> KEY_NOT_FOUND,
 * 401/403 -> PERMISSION_DENIED, 412 -> PRECONDITION_FAILED, other codes ->
 * SMUX_E_HTTP with the status kept. Returns -errno.
 */
int smux_error_from_http(struct smux_error *err, int status,
			 const char *backend, const char *what);

/*
 * The configuration key an error tells its reader to fix. A backend that
 * learns from a server that its configuration is wrong (401 for a zone at
 * another region, a region the identity catalog lacks) reports
 * SMUX_E_INVALID_OPTIONS with "(check KEY =)" in the message; this copies
 * KEY (letters, digits and '_') into @out (@cap bytes, cut to fit) and
 * returns true. False, @out "", when the message names no key.
 */
bool smux_error_option(const struct smux_error_info *e, char *out,
		       unsigned cap);

/*
 * Replaces @err by a new error @code whose cause is the old error (its
 * own cause is dropped). Returns -errno of the new code.
 */
int smux_error_wrap(struct smux_error *err, enum smux_code code,
		    const char *backend, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Makes @err (a failed call's error, NULL allowed) the caller's own:
 * code LOCAL_IO with errno @sys_errno (the sink's or source's, e.g.
 * ENOSPC), keeping the backend name and the message. For the dispatch
 * wrappers and fallbacks that saw their sink or source fail. Returns
 * -@sys_errno.
 */
int smux_error_make_local(struct smux_error *err, int sys_errno);

/* Zeroes @err (NULL allowed). */
void smux_error_clear(struct smux_error *err);

/* Class of a concrete error: the code's class, or for SMUX_E_HTTP the
 * status's (4xx semantic except 408/429; everything else transient). */
enum smux_class smux_error_class(const struct smux_error_info *e);

/* "STORAGE.KEY_NOT_FOUND [file-a]: no such key: a/b (cause: ...)" into
 * @buf of @size bytes; always NUL-terminated. Returns @buf. */
char *smux_error_format(const struct smux_error *err, char *buf,
			unsigned long size);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_ERROR_H */
