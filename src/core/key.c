/* SPDX-License-Identifier: MIT */
/*
 * key.c - the key rules of smux/key.h, applied by the dispatch wrappers and
 * again by backends that map keys to paths.
 */
#include <string.h>

#include "smux/key.h"

static int bad(struct smux_error *err, const char *backend, const char *why)
{
	return smux_error_set(err, SMUX_E_INVALID_KEY, backend,
			      "invalid key: %s", why);
}

int smux_key_check_n(const char *key, size_t len, unsigned flags,
		     const char *backend, struct smux_error *err)
{
	bool prefix = (flags & SMUX_KEY_PREFIX) == SMUX_KEY_PREFIX;
	size_t seg = 0;

	if (!key)
		return bad(err, backend, "missing");
	if (len == 0) {
		if (flags & SMUX_KEY_ALLOW_EMPTY)
			return 0;
		return bad(err, backend, "empty");
	}
	if (memchr(key, '\0', len))
		return bad(err, backend, "contains a NUL byte");
	if (len > SMUX_KEY_MAX)
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, backend,
				      "key of %zu bytes exceeds %d", len,
				      SMUX_KEY_MAX);
	if (key[0] == '/')
		return bad(err, backend, "starts with '/'");
	if (key[len - 1] == '/' && !(flags & SMUX_KEY_ALLOW_DIR))
		return bad(err, backend, "ends with '/' (a directory)");

	/* Walk the segments; the last one of a prefix is only a filter. */
	for (size_t i = 0; i <= len; i++) {
		bool end = i == len;

		if (!end && key[i] != '/')
			continue;
		if (end && prefix)
			break;
		if (end && key[len - 1] == '/')
			break;
		if (i - seg == 0)
			return bad(err, backend, "empty segment");
		if (i - seg > SMUX_KEY_SEGMENT_MAX)
			return smux_error_set(err, SMUX_E_KEY_TOO_LONG, backend,
					      "a segment exceeds %d bytes",
					      SMUX_KEY_SEGMENT_MAX);
		if ((i - seg == 1 && key[seg] == '.') ||
		    (i - seg == 2 && key[seg] == '.' && key[seg + 1] == '.'))
			return bad(err, backend, "'.' or '..' segment");
		seg = i + 1;
	}
	if (prefix && len - seg > SMUX_KEY_SEGMENT_MAX)
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, backend,
				      "a segment exceeds %d bytes",
				      SMUX_KEY_SEGMENT_MAX);
	return 0;
}

int smux_key_check(const char *key, unsigned flags, const char *backend,
		   struct smux_error *err)
{
	return smux_key_check_n(key, key ? strlen(key) : 0, flags, backend,
				err);
}

bool smux_key_is_dir(const char *key)
{
	size_t len = key ? strlen(key) : 0;

	return len > 0 && key[len - 1] == '/';
}
