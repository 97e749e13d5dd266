/* SPDX-License-Identifier: MIT */
/*
 * jbytes.c - byte strings in JSON records (jbytes.h): UTF-8 as a string,
 * anything else as "<name>_hex".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jbytes.h"

int smux__jbytes_set(json_t *o, const char *name, const char *s)
{
	static const char digits[] = "0123456789abcdef";
	json_t *v = json_string(s);
	char hexname[32];
	size_t n;
	char *hex;

	if (v)
		return json_object_set_new(o, name, v);
	n = strlen(s);
	hex = malloc(2 * n + 1);
	if (!hex)
		return -1;
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[(unsigned char)s[i] >> 4];
		hex[2 * i + 1] = digits[(unsigned char)s[i] & 15];
	}
	hex[2 * n] = '\0';
	snprintf(hexname, sizeof(hexname), "%s_hex", name);
	v = json_string(hex);
	free(hex);
	return json_object_set_new(o, hexname, v);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int smux__jbytes_get(json_t *o, const char *name, char **out, char *why,
		     size_t whylen)
{
	const char *s = json_string_value(json_object_get(o, name));
	char hexname[32];
	size_t n;
	char *p;

	if (s) {
		if (!*s)
			goto out_empty;
		*out = strdup(s);
		return *out ? 0 : -ENOMEM;
	}
	snprintf(hexname, sizeof(hexname), "%s_hex", name);
	s = json_string_value(json_object_get(o, hexname));
	if (!s) {
		snprintf(why, whylen, "missing \"%s\"", name);
		return -EINVAL;
	}
	n = strlen(s);
	if (n == 0)
		goto out_empty;
	if (n % 2)
		goto out_bad_hex;
	p = malloc(n / 2 + 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(p);
			goto out_bad_hex;
		}
		p[i] = (char)(hi << 4 | lo);
	}
	p[n / 2] = '\0';
	*out = p;
	return 0;

out_bad_hex:
	snprintf(why, whylen, "bad \"%s\"", hexname);
	return -EINVAL;
out_empty:
	snprintf(why, whylen, "empty \"%s\"", name);
	return -EINVAL;
}
