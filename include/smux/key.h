/* SPDX-License-Identifier: MIT */
/*
 * smux/key.h - what a key is, and the one check every backend applies.
 *
 * A key is a '/'-separated path of segments without a leading '/':
 * "photos/2026/a.jpg". A key ending in '/' names a directory marker
 * ("photos/2026/"). Refused: the empty key, a leading '/', an empty segment
 * ("a//b"), "." or ".." segments, a NUL byte inside the key, a segment over
 * SMUX_KEY_SEGMENT_MAX bytes, a key over SMUX_KEY_MAX bytes (the
 * limit of every backend; one backend's own may be lower, see
 * smux_backend_key_max in smux/backend.h).
 */
#ifndef SMUX_KEY_H
#define SMUX_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "smux/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bytes: PATH_MAX - 1, what a file backend takes; a backend may take
 * less (an object store: 1024, smux_backend_key_max) */
#define SMUX_KEY_MAX	     4095
#define SMUX_KEY_SEGMENT_MAX 255 /* bytes, as NAME_MAX */

/* What a caller accepts besides a plain object key. */
enum smux_key_flags {
	SMUX_KEY_OBJECT = 0,	  /* "a/b" only */
	SMUX_KEY_ALLOW_DIR = 1,	  /* "a/b/" (a directory marker) too */
	SMUX_KEY_ALLOW_EMPTY = 2, /* "" (the root, for list prefixes) */
	SMUX_KEY_PREFIX = 3,	  /* list prefix: "", "a/", or "a/b" */
};

/*
 * Checks @len bytes of @key (which may hold a NUL, e.g. from a server
 * response). Returns 0 or -EINVAL (INVALID_KEY) / -ENAMETOOLONG
 * (KEY_TOO_LONG) with @err naming @backend and the reason.
 */
int smux_key_check_n(const char *key, size_t len, unsigned flags,
		     const char *backend, struct smux_error *err);
/* smux_key_check_n() over strlen(@key); @key NULL is invalid. */
int smux_key_check(const char *key, unsigned flags, const char *backend,
		   struct smux_error *err);

/* True when @key ends in '/' (a directory marker). */
bool smux_key_is_dir(const char *key);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_KEY_H */
