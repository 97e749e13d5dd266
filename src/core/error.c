/* SPDX-License-Identifier: MIT */
/*
 * error.c - the table of error codes and the helpers that fill
 * struct smux_error. Owns nothing else; never allocates.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "smux/error.h"

struct code_row {
	const char *name;
	const char *message;
	enum smux_class cls;
	int sys_errno;
};

#define ROW(c, n, m, k, e) [c] = {n, m, SMUX_CLASS_##k, e}

/* One row per code: the name string, the default message, class, errno. */
static const struct code_row code_table[SMUX_CODE_COUNT] = {
	ROW(SMUX_OK, "OK", "no error", NONE, 0),
	ROW(SMUX_E_KEY_NOT_FOUND, "STORAGE.KEY_NOT_FOUND", "no such key",
	    SEMANTIC, ENOENT),
	ROW(SMUX_E_INVALID_KEY, "STORAGE.INVALID_KEY", "invalid key", SEMANTIC,
	    EINVAL),
	ROW(SMUX_E_KEY_TOO_LONG, "STORAGE.KEY_TOO_LONG", "key too long",
	    SEMANTIC, ENAMETOOLONG),
	ROW(SMUX_E_PERMISSION_DENIED, "STORAGE.PERMISSION_DENIED",
	    "permission denied", SEMANTIC, EACCES),
	ROW(SMUX_E_NOT_EMPTY, "STORAGE.NOT_EMPTY", "directory not empty",
	    SEMANTIC, ENOTEMPTY),
	ROW(SMUX_E_IS_DIRECTORY, "STORAGE.IS_DIRECTORY", "is a directory",
	    SEMANTIC, EISDIR),
	ROW(SMUX_E_NOT_DIRECTORY, "STORAGE.NOT_DIRECTORY", "not a directory",
	    SEMANTIC, ENOTDIR),
	ROW(SMUX_E_ALREADY_EXISTS, "STORAGE.ALREADY_EXISTS", "already exists",
	    SEMANTIC, EEXIST),
	ROW(SMUX_E_PRECONDITION_FAILED, "STORAGE.PRECONDITION_FAILED",
	    "object changed (version mismatch)", SEMANTIC, ESTALE),
	ROW(SMUX_E_NOT_SUPPORTED, "STORAGE.NOT_SUPPORTED",
	    "operation not supported by this backend", SEMANTIC, ENOTSUP),
	ROW(SMUX_E_INVALID_ARGUMENT, "STORAGE.INVALID_ARGUMENT",
	    "invalid argument", SEMANTIC, EINVAL),
	ROW(SMUX_E_NO_SPACE, "STORAGE.NO_SPACE", "no space left on backend",
	    TRANSIENT, ENOSPC),
	ROW(SMUX_E_NO_MEMORY, "STORAGE.NO_MEMORY", "out of memory", TRANSIENT,
	    ENOMEM),
	ROW(SMUX_E_IO, "STORAGE.IO_ERROR", "input/output error", TRANSIENT,
	    EIO),
	ROW(SMUX_E_CONNECTION, "STORAGE.CONNECTION_FAILED", "connection failed",
	    TRANSIENT, EIO),
	ROW(SMUX_E_HTTP, "STORAGE.HTTP_ERROR", "HTTP error", TRANSIENT, EIO),
	ROW(SMUX_E_BAD_RESPONSE, "STORAGE.BAD_RESPONSE",
	    "malformed response from backend", TRANSIENT, EIO),
	ROW(SMUX_E_UNKNOWN, "STORAGE.UNKNOWN", "unknown error", TRANSIENT, EIO),
	ROW(SMUX_E_CREDENTIAL_EXPIRED, "STORAGE_CDN.CREDENTIAL_EXPIRED",
	    "credentials expired or rejected", SEMANTIC, EACCES),
	ROW(SMUX_E_ALL_BACKENDS_DOWN, "STORAGE_MUX.ALL_BACKENDS_DOWN",
	    "all backends are down", TRANSIENT, EIO),
	ROW(SMUX_E_BACKEND_TIMEOUT, "STORAGE_MUX.BACKEND_TIMEOUT",
	    "backend timed out", TRANSIENT, ETIMEDOUT),
	ROW(SMUX_E_BACKEND_ABORTED, "STORAGE_MUX.BACKEND_ABORTED",
	    "operation aborted", ABORT, EINTR),
	ROW(SMUX_E_BACKEND_DRAINING, "STORAGE_MUX.BACKEND_DRAINING",
	    "backend is draining", TRANSIENT, EAGAIN),
	ROW(SMUX_E_WRITE_FANOUT_PARTIAL, "STORAGE_MUX.WRITE_FANOUT_PARTIAL",
	    "write reached only some replicas", TRANSIENT, EIO),
	ROW(SMUX_E_WRITE_QUORUM_FAILED, "STORAGE_MUX.WRITE_QUORUM_FAILED",
	    "write reached fewer replicas than the write quorum", TRANSIENT,
	    EIO),
	ROW(SMUX_E_INVALID_WEIGHT, "STORAGE_MUX.INVALID_WEIGHT",
	    "weight must be a finite number >= 0", SEMANTIC, EINVAL),
	ROW(SMUX_E_WEIGHTED_REQUIRES_WEIGHTS,
	    "STORAGE_MUX.WEIGHTED_REQUIRES_WEIGHTS",
	    "weighted mode needs a weight on every backend", SEMANTIC, EINVAL),
	ROW(SMUX_E_BACKEND_NAME_CONFLICT, "STORAGE_MUX.BACKEND_NAME_CONFLICT",
	    "a backend with this name already exists", SEMANTIC, EEXIST),
	ROW(SMUX_E_BACKEND_NOT_FOUND, "STORAGE_MUX.BACKEND_NOT_FOUND",
	    "no backend with this name", SEMANTIC, ENOENT),
	ROW(SMUX_E_RECURSION_DEPTH_EXCEEDED,
	    "STORAGE_MUX.RECURSION_DEPTH_EXCEEDED",
	    "muxes nested deeper than 8 or in a cycle", SEMANTIC, ELOOP),
	ROW(SMUX_E_HEALTHCHECK_FAILED, "STORAGE_MUX.HEALTHCHECK_FAILED",
	    "health check failed", TRANSIENT, EIO),
	ROW(SMUX_E_MIRROR_ORIGIN_REQUIRED, "STORAGE_MUX.MIRROR_ORIGIN_REQUIRED",
	    "shield mode needs an origin backend", SEMANTIC, EINVAL),
	ROW(SMUX_E_INVALID_OPTIONS, "STORAGE_MUX.INVALID_OPTIONS",
	    "invalid mux options", SEMANTIC, EINVAL),
	ROW(SMUX_E_HINT_JOURNAL_FAILED, "STORAGE_MUX.HINT_JOURNAL_FAILED",
	    "could not record a repair hint", TRANSIENT, EIO),
	ROW(SMUX_E_NO_ATTR, "STORAGE.NO_ATTRIBUTE",
	    "no such extended attribute", SEMANTIC, ENODATA),
	ROW(SMUX_E_LOCAL_IO, "STORAGE.LOCAL_IO_ERROR",
	    "local input/output error (the caller's sink or source)", LOCAL,
	    EIO),
};

static const struct code_row *code_row(enum smux_code code)
{
	if ((unsigned)code >= SMUX_CODE_COUNT)
		return &code_table[SMUX_E_UNKNOWN];
	return &code_table[code];
}

const char *smux_code_name(enum smux_code code)
{
	return code_row(code)->name;
}

const char *smux_code_message(enum smux_code code)
{
	return code_row(code)->message;
}

enum smux_class smux_code_class(enum smux_code code)
{
	return code_row(code)->cls;
}

int smux_code_errno(enum smux_code code)
{
	return code_row(code)->sys_errno;
}

enum smux_code smux_code_from_name(const char *name)
{
	if (!name)
		return SMUX_CODE_COUNT;
	for (unsigned i = 0; i < SMUX_CODE_COUNT; i++)
		if (strcmp(code_table[i].name, name) == 0)
			return (enum smux_code)i;
	return SMUX_CODE_COUNT;
}

const char *smux_class_name(enum smux_class cls)
{
	switch (cls) {
	case SMUX_CLASS_ABORT:
		return "abort";
	case SMUX_CLASS_SEMANTIC:
		return "semantic";
	case SMUX_CLASS_TRANSIENT:
		return "transient";
	case SMUX_CLASS_LOCAL:
		return "local";
	case SMUX_CLASS_NONE:
		break;
	}
	return "none";
}

int smux_error_make_local(struct smux_error *err, int sys_errno)
{
	if (sys_errno <= 0)
		sys_errno = EIO;
	if (err) {
		err->e.code = SMUX_E_LOCAL_IO;
		err->e.sys_errno = sys_errno;
		err->e.http_status = 0;
	}
	return -sys_errno;
}

void smux_error_clear(struct smux_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

static void copy_name(char *dst, size_t size, const char *src)
{
	if (!src) {
		dst[0] = '\0';
		return;
	}
	snprintf(dst, size, "%s", src);
}

int smux_error_setv(struct smux_error *err, enum smux_code code,
		    const char *backend, const char *fmt, va_list ap)
{
	const struct code_row *row = code_row(code);

	if (err) {
		smux_error_clear(err);
		err->e.code = code;
		err->e.sys_errno = row->sys_errno;
		copy_name(err->e.backend, sizeof(err->e.backend), backend);
		if (fmt)
			vsnprintf(err->e.message, sizeof(err->e.message), fmt,
				  ap);
		else
			copy_name(err->e.message, sizeof(err->e.message),
				  row->message);
	}
	return -row->sys_errno;
}

int smux_error_set(struct smux_error *err, enum smux_code code,
		   const char *backend, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = smux_error_setv(err, code, backend, fmt, ap);
	va_end(ap);
	return rc;
}

/* Which code a failed system call means for a backend. */
static enum smux_code code_of_errno(int sys_errno)
{
	switch (sys_errno) {
	case ENOENT:
		return SMUX_E_KEY_NOT_FOUND;
	case ENAMETOOLONG:
		return SMUX_E_KEY_TOO_LONG;
	case EACCES:
	case EPERM:
	case EROFS:
		return SMUX_E_PERMISSION_DENIED;
	case ENOTEMPTY:
		return SMUX_E_NOT_EMPTY;
	case EISDIR:
		return SMUX_E_IS_DIRECTORY;
	case ENOTDIR:
		return SMUX_E_NOT_DIRECTORY;
	case EEXIST:
		return SMUX_E_ALREADY_EXISTS;
	case ENOTSUP:
		return SMUX_E_NOT_SUPPORTED;
	case ENODATA:
		return SMUX_E_NO_ATTR;
	case ERANGE: /* an xattr buffer too small (errno kept) */
	case E2BIG:  /* an xattr value too large (errno kept) */
	/* a size, value or link count past the backend's limit: the
	 * request is refused, the backend is fine (errno kept) */
	case EFBIG:
	case EOVERFLOW:
	case EMLINK:
	case EINVAL:
		return SMUX_E_INVALID_ARGUMENT;
	case EXDEV:
	case ELOOP:
		/* a path that would leave the backend's root */
		return SMUX_E_INVALID_KEY;
	case ENOSPC:
	case EDQUOT:
		return SMUX_E_NO_SPACE;
	case ENOMEM:
		return SMUX_E_NO_MEMORY;
	case EMFILE:
	case ENFILE:
		/* the daemon's own descriptor limit (or the system's), not
		 * the storage's: nothing is known about the member, another
		 * would fail the same way, and the caller sees EMFILE as a
		 * local program would (errno kept) */
		return SMUX_E_LOCAL_IO;
	case EINTR:
	case ECANCELED:
		return SMUX_E_BACKEND_ABORTED;
	case ETIMEDOUT: /* a backend's own timeout; BACKEND_TIMEOUT is the
			   bulkhead's */
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EPIPE:
		return SMUX_E_CONNECTION;
	default:
		return SMUX_E_IO;
	}
}

int smux_error_from_errno(struct smux_error *err, int sys_errno,
			  const char *backend, const char *what)
{
	enum smux_code code;
	char buf[128];

	if (sys_errno <= 0)
		sys_errno = EIO;
	code = code_of_errno(sys_errno);
	if (err) {
		smux_error_set(err, code, backend, "%s: %s",
			       what ? what : "system call",
			       strerror_r(sys_errno, buf, sizeof(buf)));
		if (code != SMUX_E_INVALID_KEY)
			err->e.sys_errno = sys_errno;
	}
	return code == SMUX_E_INVALID_KEY ? -smux_code_errno(code) : -sys_errno;
}

bool smux_error_option(const struct smux_error_info *e, char *out, unsigned cap)
{
	const char *p = e ? strstr(e->message, "(check ") : NULL;
	unsigned n = 0;

	if (cap)
		out[0] = '\0';
	if (!p || !cap)
		return false;
	p += strlen("(check ");
	while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
	       (p[n] >= '0' && p[n] <= '9') || p[n] == '_')
		n++;
	if (!n || strncmp(p + n, " =", 2) != 0)
		return false;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

int smux_error_from_http(struct smux_error *err, int status,
			 const char *backend, const char *what)
{
	enum smux_code code;
	int sys_errno;

	switch (status) {
	case 404:
	case 410:
		code = SMUX_E_KEY_NOT_FOUND;
		break;
	case 401:
	case 403:
		code = SMUX_E_PERMISSION_DENIED;
		break;
	case 412:
		code = SMUX_E_PRECONDITION_FAILED;
		break;
	case 507:
		code = SMUX_E_NO_SPACE;
		break;
	default:
		code = SMUX_E_HTTP;
		break;
	}
	sys_errno = smux_code_errno(code);
	if (code == SMUX_E_HTTP) {
		if (status == 408 || status == 504)
			sys_errno = ETIMEDOUT;
		else if (status == 429 || status == 503)
			sys_errno = EAGAIN;
		else if (status == 423) /* WebDAV: locked by another client */
			sys_errno = EBUSY;
		else if (status >= 400 && status < 500)
			sys_errno = EINVAL;
	}
	if (err) {
		smux_error_set(err, code, backend, "%s: HTTP %d",
			       what ? what : "", status);
		err->e.http_status = status;
		err->e.sys_errno = sys_errno;
	}
	return -sys_errno;
}

int smux_error_wrap(struct smux_error *err, enum smux_code code,
		    const char *backend, const char *fmt, ...)
{
	struct smux_error_info old;
	unsigned attempts;
	va_list ap;
	int rc;

	if (!err) {
		return -smux_code_errno(code);
	}
	old = err->e;
	attempts = old.attempts;
	va_start(ap, fmt);
	rc = smux_error_setv(err, code, backend, fmt, ap);
	va_end(ap);
	err->e.attempts = attempts;
	if (old.code != SMUX_OK) {
		err->has_cause = true;
		err->cause = old;
	}
	return rc;
}

enum smux_class smux_error_class(const struct smux_error_info *e)
{
	if (!e || e->code == SMUX_OK)
		return SMUX_CLASS_NONE;
	if (e->code == SMUX_E_HTTP && e->http_status >= 400 &&
	    e->http_status < 500 && e->http_status != 408 &&
	    e->http_status != 429)
		return SMUX_CLASS_SEMANTIC;
	return smux_code_class(e->code);
}

static size_t format_info(const struct smux_error_info *e, char *buf,
			  size_t size)
{
	int n;

	n = snprintf(buf, size, "%s%s%s%s: %s", smux_code_name(e->code),
		     e->backend[0] ? " [" : "", e->backend,
		     e->backend[0] ? "]" : "", e->message);
	if (n < 0)
		return 0;
	return (size_t)n < size ? (size_t)n : size - 1;
}

char *smux_error_format(const struct smux_error *err, char *buf,
			unsigned long size)
{
	size_t n;

	if (!buf || size == 0)
		return buf;
	buf[0] = '\0';
	if (!err)
		return buf;
	n = format_info(&err->e, buf, size);
	if (err->has_cause && n + 10 < size) {
		n += (size_t)snprintf(buf + n, size - n, " (cause: ");
		n += format_info(&err->cause, buf + n, size - n);
		if (n + 1 < size)
			snprintf(buf + n, size - n, ")");
	}
	return buf;
}
