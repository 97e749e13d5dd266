// SPDX-License-Identifier: MIT
/*
 * bunny_json.c - Bunny Storage's JSON answers (DESCRIBE: one object; GET
 * dir/: an array of them) into struct smux__bunny_obj, with jansson.
 *
 * Fields read: ObjectName, IsDirectory, Length, LastChanged, Checksum.
 * The others (Guid, Path, ServerId, ReplicatedZones, ...) are ignored.
 * Timestamps have no zone and are UTC (the official JS SDK reads them as
 * local time; that is a bug this avoids).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "backends/bunny_internal.h"

static int digits(const char *s, size_t n, int *out)
{
	int v = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int64_t smux__bunny_parse_time(const char *s, size_t len)
{
	int y, mo, d, h, mi, se;
	int64_t frac_ns = 0, scale = 100000000;
	struct tm tm = {0};
	size_t i = 19;
	time_t t;

	if (len < 19 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':')
		return -1;
	if (digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) ||
	    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) ||
	    digits(s + 17, 2, &se))
		return -1;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
	    mi > 59 || se > 60)
		return -1;
	if (i < len && s[i] == '.') {
		i++;
		if (i >= len || !isdigit((unsigned char)s[i]))
			return -1;
		for (; i < len && isdigit((unsigned char)s[i]); i++) {
			frac_ns += (s[i] - '0') * scale;
			scale /= 10;
		}
	}
	if (i < len && s[i] == 'Z')
		i++;
	if (i != len)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	if (t < 0)
		return -1;
	return smux_time_ns((int64_t)t, (long)frac_ns);
}

static int bad(char *why, size_t wl, const char *msg)
{
	snprintf(why, wl, "%s", msg);
	return -EBADMSG;
}

/* One JSON object into @o. */
static int obj_from(json_t *j, struct smux__bunny_obj *o, char *why, size_t wl)
{
	json_t *name = json_object_get(j, "ObjectName");
	json_t *isdir = json_object_get(j, "IsDirectory");
	json_t *len = json_object_get(j, "Length");
	json_t *lc = json_object_get(j, "LastChanged");
	json_t *ck = json_object_get(j, "Checksum");
	const char *s;
	size_t n;

	memset(o, 0, sizeof(*o));
	if (!json_is_object(j))
		return bad(why, wl, "an entry is not a JSON object");
	if (!json_is_string(name))
		return bad(why, wl, "ObjectName missing or not a string");
	s = json_string_value(name);
	n = json_string_length(name);
	if (n > SMUX__BUNNY_NAME_MAX || memchr(s, '\0', n) || memchr(s, '/', n))
		return bad(why, wl, "ObjectName is not one path segment");
	if (isdir && !json_is_boolean(isdir))
		return bad(why, wl, "IsDirectory is not a boolean");
	o->is_dir = isdir && json_is_true(isdir);
	if (len && !json_is_null(len)) {
		if (!json_is_integer(len) || json_integer_value(len) < 0)
			return bad(why, wl, "Length is not a size");
		o->length = (uint64_t)json_integer_value(len);
	}
	if (lc && !json_is_null(lc)) {
		if (!json_is_string(lc))
			return bad(why, wl, "LastChanged is not a string");
		o->mtime_ns = smux__bunny_parse_time(json_string_value(lc),
						     json_string_length(lc));
		if (o->mtime_ns < 0)
			return bad(why, wl, "LastChanged is not a timestamp");
	}
	if (ck && json_is_string(ck) && json_string_length(ck) == 64) {
		const char *c = json_string_value(ck);
		bool hex = true;

		for (int i = 0; i < 64; i++)
			if (!isxdigit((unsigned char)c[i]))
				hex = false;
		if (hex)
			for (int i = 0; i < 64; i++)
				o->checksum[i] =
					(char)toupper((unsigned char)c[i]);
	} else if (ck && !json_is_null(ck) && !json_is_string(ck)) {
		return bad(why, wl, "Checksum is not a string");
	}
	o->name = strndup(s, n);
	return o->name ? 0 : -ENOMEM;
}

static json_t *load(const char *buf, size_t len, char *why, size_t wl)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);

	if (!j)
		snprintf(why, wl, "not JSON (%.80s)", je.text);
	return j;
}

int smux__bunny_parse_obj(const char *buf, size_t len,
			  struct smux__bunny_obj *o, char *why, size_t wl)
{
	json_t *j = load(buf, len, why, wl);
	int rc;

	memset(o, 0, sizeof(*o));
	if (!j)
		return -EBADMSG;
	rc = obj_from(j, o, why, wl);
	json_decref(j);
	return rc;
}

void smux__bunny_objs_free(struct smux__bunny_obj *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].name);
	free(v);
}

int smux__bunny_parse_list(const char *buf, size_t len,
			   struct smux__bunny_obj **out, size_t *n, char *why,
			   size_t wl)
{
	json_t *j = load(buf, len, why, wl);
	struct smux__bunny_obj *v = NULL;
	size_t cnt, i;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!j)
		return -EBADMSG;
	if (!json_is_array(j)) {
		json_decref(j);
		return bad(why, wl, "a listing is not a JSON array");
	}
	cnt = json_array_size(j);
	if (cnt > SMUX__BUNNY_ENTRIES_MAX) {
		json_decref(j);
		snprintf(why, wl, "more than %u entries",
			 SMUX__BUNNY_ENTRIES_MAX);
		return -E2BIG;
	}
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v) {
		json_decref(j);
		return -ENOMEM;
	}
	for (i = 0; i < cnt && rc == 0; i++)
		rc = obj_from(json_array_get(j, i), &v[i], why, wl);
	json_decref(j);
	if (rc < 0) {
		smux__bunny_objs_free(v, i);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void smux__bunny_hex(const unsigned char *md, unsigned int mdlen, char *hex)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t n = mdlen < 32 ? mdlen : 32;

	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}
