// SPDX-License-Identifier: MIT
/*
 * config_value.c - the syntax of configuration values: durations, sizes,
 * booleans, counts, rates, weights, user and group ids, umasks, paths,
 * key prefixes and section names, and their quoting in messages.
 *
 * Owns nothing but pure functions; used for the file and for -o options
 * alike, so both say the same thing about the same mistake.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/config_internal.h"
#include "smux/key.h"

#define Q(s, b) smux__cfg_quote((s), strlen(s), (b), sizeof(b))

char *smux__cfg_quote(const char *s, size_t n, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char tmp[4];
		size_t t = 0;

		if (c == '"' || c == '\\') {
			tmp[t++] = '\\';
			tmp[t++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			tmp[t++] = '\\';
			tmp[t++] = 'x';
			tmp[t++] = hex[c >> 4];
			tmp[t++] = hex[c & 15];
		} else {
			tmp[t++] = (char)c;
		}
		/* room for this, '...', '"' and NUL; stop at ~80 shown */
		if (o + t + 5 > len || o > 80)
			break;
		memcpy(buf + o, tmp, t);
		o += t;
	}
	if (i < n) {
		/* do not cut a UTF-8 sequence in two */
		while (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80)
			o--;
		if (o > 1 && (unsigned char)buf[o - 1] >= 0xc0)
			o--;
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

bool smux__cfg_utf8_ok(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t need;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			need = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		if (n - i <= need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

bool smux__cfg_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > SMUX__CFG_NAME_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '.' && c != '_' && c != '-')
			return false;
	}
	return true;
}

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/*
 * A plain decimal number: digits, optionally '.' and digits. No sign, no
 * exponent, no hex, no "inf"/"nan". Sets *@d; false when malformed.
 */
static bool parse_decimal(const char *s, size_t n, double *d)
{
	char tmp[256];
	size_t dot = n;
	char *end;

	if (n == 0 || n >= sizeof(tmp))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && dot == n)
			dot = i;
		else if (s[i] < '0' || s[i] > '9')
			return false;
	}
	if (dot == 0 || dot == n - 1)
		return false;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	errno = 0;
	*d = strtod(tmp, &end);
	return *end == '\0' && errno == 0 && isfinite(*d);
}

/* An unsigned decimal integer without sign; false when malformed or
 * beyond UINT64_MAX (*@overflow then true). */
static bool parse_uint(const char *s, size_t n, uint64_t *v, bool *overflow)
{
	uint64_t x = 0;

	*overflow = false;
	if (!all_digits(s, n))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (x > (UINT64_MAX - d) / 10) {
			*overflow = true;
			return false;
		}
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

int smux__cfg_parse_duration(const char *s, int64_t *ms, char *why, size_t len)
{
	static const struct {
		const char *unit;
		double ms;
	} units[] = {
		{"ms", 1},	{"s", 1000}, {"m", 60000},
		{"h", 3600000}, {"", 1000},
	};
	char q[SMUX__CFG_QUOTE_MAX];
	size_t n = strlen(s), num = 0;
	double v;

	if (s[0] == '-') {
		snprintf(why, len, "invalid duration %s (must not be negative)",
			 Q(s, q));
		return -EINVAL;
	}
	while (num < n && ((s[num] >= '0' && s[num] <= '9') || s[num] == '.'))
		num++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s + num, units[i].unit) != 0)
			continue;
		if (!parse_decimal(s, num, &v))
			break;
		v *= units[i].ms;
		if (v > (double)SMUX__CFG_DURATION_MAX_MS) {
			snprintf(why, len,
				 "duration %s is too long (at most 8760h)",
				 Q(s, q));
			return -ERANGE;
		}
		if (fabs(v - round(v)) > 1e-6) {
			snprintf(why, len,
				 "invalid duration %s (the smallest unit is "
				 "1ms)",
				 Q(s, q));
			return -EINVAL;
		}
		*ms = (int64_t)llround(v);
		return 0;
	}
	snprintf(why, len, "invalid duration %s (use 500ms, 30s, 5m, 1h)",
		 Q(s, q));
	return -EINVAL;
}

int smux__cfg_parse_size(const char *s, uint64_t *bytes, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	size_t n = strlen(s);
	unsigned shift = 0;
	bool overflow;
	uint64_t v;

	if (n > 0) {
		switch (s[n - 1]) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		case 't':
		case 'T':
			shift = 40;
			break;
		default:
			break;
		}
	}
	if (!parse_uint(s, shift ? n - 1 : n, &v, &overflow)) {
		if (overflow)
			goto too_large;
		snprintf(why, len, "invalid size %s (use 4096, 64K, 64M, 10G)",
			 Q(s, q));
		return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		goto too_large;
	*bytes = v << shift;
	return 0;
too_large:
	snprintf(why, len, "size %s is too large", Q(s, q));
	return -ERANGE;
}

int smux__cfg_parse_bool(const char *s, bool *b, char *why, size_t len)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	char q[SMUX__CFG_QUOTE_MAX];

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*b = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*b = false;
			return 0;
		}
	}
	snprintf(why, len,
		 "invalid boolean %s (use true/false, yes/no, on/off, 1/0)",
		 Q(s, q));
	return -EINVAL;
}

int smux__cfg_parse_count(const char *s, uint64_t *n, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	bool overflow;
	uint64_t v = 0;

	if (!parse_uint(s, strlen(s), &v, &overflow) || v < 1 ||
	    v > SMUX__CFG_COUNT_MAX) {
		snprintf(why, len,
			 "invalid number %s (use a whole number from 1 to %u)",
			 Q(s, q), SMUX__CFG_COUNT_MAX);
		return overflow || v > SMUX__CFG_COUNT_MAX ? -ERANGE : -EINVAL;
	}
	*n = v;
	return 0;
}

int smux__cfg_parse_u64(const char *s, uint64_t *n, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	bool overflow;

	if (!parse_uint(s, strlen(s), n, &overflow)) {
		snprintf(why, len,
			 overflow ? "number %s is too large (at most %" PRIu64
				    ")"
				  : "invalid number %s (use a whole number "
				    "from 0 to %" PRIu64 ")",
			 Q(s, q), UINT64_MAX);
		return overflow ? -ERANGE : -EINVAL;
	}
	return 0;
}

int smux__cfg_parse_rate(const char *s, double *d, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];

	if (!parse_decimal(s, strlen(s), d) || *d > 1) {
		snprintf(why, len, "invalid rate %s (use a number from 0 to 1)",
			 Q(s, q));
		return -EINVAL;
	}
	return 0;
}

int smux__cfg_parse_weight(const char *s, double *d, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];

	/* 1e15 keeps sums of weights exact enough for the alias table */
	if (!parse_decimal(s, strlen(s), d) || *d > 1e15) {
		snprintf(why, len,
			 "invalid weight %s (use a decimal number from 0 to "
			 "1000000000000000, as 1, 2.5 or 300)",
			 Q(s, q));
		return -EINVAL;
	}
	return 0;
}

/* A numeric id: 0 .. 2^32 - 2 ((uid_t)-1 means "no change" to chown). */
static int parse_id(const char *s, uint64_t *id, bool *numeric)
{
	bool overflow;

	*numeric = all_digits(s, strlen(s));
	if (!*numeric)
		return -EINVAL;
	if (!parse_uint(s, strlen(s), id, &overflow) || *id >= UINT32_MAX)
		return -ERANGE;
	return 0;
}

int smux__cfg_parse_uid(const char *s, uid_t *uid, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX], buf[4096];
	struct passwd pw, *res = NULL;
	bool numeric;
	uint64_t id;
	int rc;

	rc = parse_id(s, &id, &numeric);
	if (numeric) {
		if (rc) {
			snprintf(why, len, "user id %s is out of range",
				 Q(s, q));
			return rc;
		}
		*uid = (uid_t)id;
		return 0;
	}
	if (s[0] == '\0' || getpwnam_r(s, &pw, buf, sizeof(buf), &res) != 0 ||
	    !res) {
		snprintf(why, len, "unknown user %s", Q(s, q));
		return -EINVAL;
	}
	*uid = res->pw_uid;
	return 0;
}

int smux__cfg_parse_gid(const char *s, gid_t *gid, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX], buf[4096];
	struct group gr, *res = NULL;
	bool numeric;
	uint64_t id;
	int rc;

	rc = parse_id(s, &id, &numeric);
	if (numeric) {
		if (rc) {
			snprintf(why, len, "group id %s is out of range",
				 Q(s, q));
			return rc;
		}
		*gid = (gid_t)id;
		return 0;
	}
	if (s[0] == '\0' || getgrnam_r(s, &gr, buf, sizeof(buf), &res) != 0 ||
	    !res) {
		snprintf(why, len, "unknown group %s", Q(s, q));
		return -EINVAL;
	}
	*gid = res->gr_gid;
	return 0;
}

int smux__cfg_parse_umask(const char *s, mode_t *m, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	size_t n = strlen(s);
	unsigned v = 0;

	if (n == 0 || n > 4)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '7')
			goto bad;
		v = v * 8 + (unsigned)(s[i] - '0');
	}
	if (v > 0777)
		goto bad;
	*m = (mode_t)v;
	return 0;
bad:
	snprintf(why, len,
		 "invalid umask %s (use octal from 000 to 777, "
		 "e.g. 022)",
		 Q(s, q));
	return -EINVAL;
}

int smux__cfg_parse_abspath(const char *s, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];

	if (s[0] != '/') {
		snprintf(why, len, "not an absolute path: %s", Q(s, q));
		return -EINVAL;
	}
	return 0;
}

int smux__cfg_parse_prefix(const char *s, char **out, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	struct smux_error err;
	size_t b = 0, e = strlen(s);

	while (s[b] == '/')
		b++;
	while (e > b && s[e - 1] == '/')
		e--;
	if (e > b &&
	    smux_key_check_n(s + b, e - b, SMUX_KEY_OBJECT, NULL, &err) != 0) {
		snprintf(why, len, "invalid prefix %s (%s)", Q(s, q),
			 err.e.message);
		return -EINVAL;
	}
	*out = strndup(s + b, e - b);
	return *out ? 0 : -ENOMEM;
}

char *smux__cfg_fmt_duration(int64_t ms, char *buf, size_t len)
{
	if (ms != 0 && ms % 3600000 == 0)
		snprintf(buf, len, "%" PRId64 "h", ms / 3600000);
	else if (ms != 0 && ms % 60000 == 0)
		snprintf(buf, len, "%" PRId64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%" PRId64 "s", ms / 1000);
	else
		snprintf(buf, len, "%" PRId64 "ms", ms);
	return buf;
}

char *smux__cfg_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "TGMK";
	unsigned shift = 40;

	for (size_t i = 0; i < 4; i++, shift -= 10) {
		uint64_t unit = (uint64_t)1 << shift;

		if (bytes != 0 && bytes % unit == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", bytes / unit,
				 units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64, bytes);
	return buf;
}
