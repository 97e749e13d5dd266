// SPDX-License-Identifier: MIT
/*
 * backends/s3_creds.c - S3 credentials from an AWS shared-credentials file
 * (parsed with inih) or from the environment (s3_sign.h).
 *
 * Owns: reading one profile's aws_access_key_id, aws_secret_access_key and
 * aws_session_token. Never logs or formats a value: every error names the
 * file, line, profile and key only.
 *
 * Debian's libinih is built with a 200-byte line buffer, shorter than an
 * STS session token. The line reader given to inih therefore keeps any
 * longer line (up to LONG_LINE_MAX) aside and hands inih the line with its
 * value replaced by a marker; the handler swaps the marker back for the
 * kept value. inih still does all the INI parsing of names and sections.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>
#include <openssl/crypto.h>

#include "backends/s3_sign.h"

#define LONG_LINE_MAX (SMUX_S3_TOKEN_MAX + 256)
#define LONG_MARK     "\x01long\x01"

struct creds_parser {
	FILE *f;
	const char *path;
	const char *profile;
	int lineno;	    /* of the line last handed to inih */
	char *long_value;   /* the value of the current long line, or NULL */
	int long_line;	    /* its line number */
	bool too_long;	    /* a line over LONG_LINE_MAX was seen */
	int too_long_line;  /* ... at this line */
	bool found_profile; /* a key of the profile was seen */
	struct smux_s3_creds *out;
	int bad_line; /* first line with a value we refused, 0 = none */
	const char *bad_what;
};

static void wipe_free(char **s)
{
	if (*s) {
		OPENSSL_cleanse(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

/* Reads one whole line into a heap buffer (bounded); NULL at EOF. */
static char *read_long_line(struct creds_parser *p, const char *start, size_t n)
{
	size_t cap = n + 256, len = n;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	memcpy(buf, start, n);
	int c;
	while ((c = fgetc(p->f)) != EOF && c != '\n') {
		if (len + 2 > cap) {
			if (cap >= LONG_LINE_MAX) {
				p->too_long = true;
				continue; /* drain the rest of the line */
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				OPENSSL_cleanse(buf, len);
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		buf[len++] = (char)c;
	}
	buf[len] = '\0';
	return buf;
}

/* inih's reader: fgets, except for lines that do not fit @num bytes. */
static char *creds_reader(char *str, int num, void *stream)
{
	struct creds_parser *p = stream;
	if (!fgets(str, num, p->f))
		return NULL;
	p->lineno++;
	size_t n = strlen(str);
	if (n == 0 || str[n - 1] == '\n' || feof(p->f))
		return str;
	/* Longer than inih's buffer: keep the value part aside. */
	char *line = read_long_line(p, str, n);
	if (!line || p->too_long) {
		if (line) {
			OPENSSL_cleanse(line, strlen(line));
			free(line);
		}
		p->too_long = true;
		p->too_long_line = p->lineno;
		snprintf(str, (size_t)num, ";\n");
		return str;
	}
	char *eq = strpbrk(line, "=:");
	size_t name_len = eq ? (size_t)(eq - line) : 0;
	if (!eq) {
		/* not "name = value": let inih refuse the start of it as a
		 * syntax error */
		OPENSSL_cleanse(line, strlen(line));
		free(line);
		return str;
	}
	if (name_len + sizeof(" = " LONG_MARK "\n") > (size_t)num) {
		/* a name too long to hand over whole: refuse the line
		 * rather than let inih see a cut value */
		OPENSSL_cleanse(line, strlen(line));
		free(line);
		p->too_long = true;
		p->too_long_line = p->lineno;
		snprintf(str, (size_t)num, ";\n");
		return str;
	}
	wipe_free(&p->long_value);
	p->long_value = strdup(eq + 1);
	OPENSSL_cleanse(line + name_len, strlen(line + name_len));
	p->long_line = p->lineno;
	snprintf(str, (size_t)num, "%.*s = %s\n", (int)name_len, line,
		 LONG_MARK);
	free(line);
	return str;
}

/* The value with surrounding blanks removed, as a heap string. */
static char *trimmed_dup(const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
		n--;
	return strndup(v, n);
}

static int creds_handler(void *user, const char *section, const char *name,
			 const char *value)
{
	struct creds_parser *p = user;
	char **slot = NULL;
	if (strcmp(section, p->profile) != 0)
		return 1;
	p->found_profile = true;
	if (!strcmp(name, "aws_access_key_id"))
		slot = &p->out->access_key;
	else if (!strcmp(name, "aws_secret_access_key"))
		slot = &p->out->secret_key;
	else if (!strcmp(name, "aws_session_token") ||
		 !strcmp(name, "aws_security_token"))
		slot = &p->out->session_token;
	if (!slot)
		return 1; /* other keys (region, output...) are not ours */
	const char *v = value;
	if (!strcmp(value, LONG_MARK) && p->long_value &&
	    p->long_line == p->lineno)
		v = p->long_value;
	wipe_free(slot);
	*slot = trimmed_dup(v);
	if (!*slot) {
		p->bad_line = p->lineno;
		p->bad_what = "out of memory";
		return 0;
	}
	size_t max = slot == &p->out->session_token ? SMUX_S3_TOKEN_MAX
						    : SMUX_S3_KEY_MAX;
	if (strlen(*slot) >= max && !p->bad_line) {
		p->bad_line = p->lineno;
		p->bad_what = "value too long";
	}
	return 1;
}

int smux__s3_creds_from_file(const char *path, const char *profile,
			     struct smux_s3_creds *out, struct smux_error *err)
{
	struct creds_parser p = {
		.path = path,
		.profile = profile && *profile ? profile : "default",
		.out = out,
	};
	int rc = 0;
	memset(out, 0, sizeof(*out));
	p.f = fopen(path, "re");
	if (!p.f) {
		int e = errno;
		char what[512];
		snprintf(what, sizeof(what), "credentials file %s", path);
		return smux_error_from_errno(err, e, NULL, what);
	}
	int line = ini_parse_stream(creds_reader, &p, creds_handler, &p);
	fclose(p.f);
	wipe_free(&p.long_value);
	if (p.too_long) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s:%d: line too long (over %d bytes)",
				    path, p.too_long_line, LONG_LINE_MAX);
	} else if (line > 0) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s:%d: syntax error", path, line);
	} else if (line < 0) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
				    "%s: out of memory", path);
	} else if (p.bad_line) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s:%d: profile [%s]: %s", path, p.bad_line,
				    p.profile, p.bad_what);
	} else if (!p.found_profile) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s: no profile [%s]", path, p.profile);
	} else if (!out->access_key || !*out->access_key) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s: profile [%s]: aws_access_key_id "
				    "missing",
				    path, p.profile);
	} else if (!out->secret_key || !*out->secret_key) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				    "%s: profile [%s]: aws_secret_access_key "
				    "missing",
				    path, p.profile);
	}
	if (!rc && out->session_token && !*out->session_token)
		wipe_free(&out->session_token);
	if (rc)
		smux__s3_creds_release(out);
	return rc;
}

int smux__s3_creds_from_env(const char *prefix, struct smux_s3_creds *out,
			    struct smux_error *err)
{
	static const char *const suffix[] = {
		"_ACCESS_KEY_ID", "_SECRET_ACCESS_KEY", "_SESSION_TOKEN"};
	char **slots[3];
	char name[3][128];
	const char *vals[3];
	memset(out, 0, sizeof(*out));
	slots[0] = &out->access_key;
	slots[1] = &out->secret_key;
	slots[2] = &out->session_token;
	if (!prefix || !*prefix)
		prefix = "AWS";
	if (strlen(prefix) > 64)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "credentials environment prefix too "
				      "long");
	for (int i = 0; i < 3; i++) {
		snprintf(name[i], sizeof(name[i]), "%s%s", prefix, suffix[i]);
		vals[i] = getenv(name[i]);
	}
	for (int i = 0; i < 2; i++)
		if (!vals[i] || !*vals[i])
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
					      "environment: %s not set",
					      name[i]);
	for (int i = 0; i < 3; i++) {
		size_t max = i == 2 ? SMUX_S3_TOKEN_MAX : SMUX_S3_KEY_MAX;
		if (!vals[i] || !*vals[i])
			continue;
		if (strlen(vals[i]) >= max) {
			smux__s3_creds_release(out);
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
					      "environment: %s too long",
					      name[i]);
		}
		char *v = strdup(vals[i]);
		if (!v) {
			smux__s3_creds_release(out);
			return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
					      NULL);
		}
		*slots[i] = v;
	}
	return 0;
}
