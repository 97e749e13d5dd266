/* SPDX-License-Identifier: MIT */
/*
 * jbytes.h (internal) - byte strings (keys, names: any bytes but NUL) in
 * JSON records. A JSON string must be valid UTF-8 and a file name need
 * not be: such a field is written as "<name>_hex", its bytes in hex.
 *
 * Owner: jbytes.c. Users: the hint journal (hints_journal.c) and the link
 * book (linkbook.c), whose files hold keys.
 */
#ifndef SMUX_CORE_JBYTES_H
#define SMUX_CORE_JBYTES_H

#include <jansson.h>
#include <stddef.h>

/* Sets @o's field @name to the string @s, or "<name>_hex" to its bytes
 * in hex when @s is not valid UTF-8. 0, or -1 without memory. */
int smux__jbytes_set(json_t *o, const char *name, const char *s);

/*
 * Reads @o's string field @name (or "<name>_hex") into a new string
 * *@out. Returns 0, -EINVAL with @why set (missing, empty, bad hex or a
 * NUL byte), or -ENOMEM.
 */
int smux__jbytes_get(json_t *o, const char *name, char **out, char *why,
		     size_t whylen);

#endif /* SMUX_CORE_JBYTES_H */
