// SPDX-License-Identifier: MIT
/*
 * config_parse.c - reading a configuration file (DESIGN section 6) into a
 * struct smux_config: inih splits the key = value lines (comments, inline
 * "; comments", trimming, "key: value"), and this file checks every key and
 * value as it arrives, then has each section checked as it ends.
 *
 * inih (r55) is fed through our own line reader, which is what gives
 * every message its line number, and which also:
 *  - refuses NUL bytes, invalid UTF-8 and lines longer than inih's buffer
 *    (inih would silently cut them into several lines);
 *  - removes leading blanks, so inih's indented-continuation lines never
 *    apply (an indented key is just a key);
 *  - reads the [section] headers itself and hands inih a blank line
 *    instead: inih cuts section names at 49 bytes and says nothing about a
 *    section without keys, and both matter for names and line numbers.
 * Errors stop the reading at once: the message is always the first error
 * in the file.
 *
 * Never touches a backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/config_internal.h"

#define NAME_USE "use 1-63 of A-Z a-z 0-9 . _ -, not starting with ."

/* ---- the reader and the handler ---- */

struct cfg_parser {
	struct smux_config *cfg;
	const char *buf; /* the whole file */
	size_t len, pos;
	int lineno;		       /* of the line last handed to inih */
	struct smux__cfg_section *cur; /* section of that line */
	bool at_eof;
	bool failed;
	int rc;	      /* with failed: -EINVAL or -ENOMEM */
	int err_line; /* with failed: the line read when it was found */
	char *errbuf;
	size_t errlen;
};

/* Stops the reading with @rc once errbuf holds the message. */
static void stop(struct cfg_parser *p, int rc)
{
	p->failed = true;
	p->rc = rc;
	/* an error found at the end of the file follows every line */
	p->err_line = p->lineno + (p->at_eof ? 1 : 0);
}

static void __attribute__((format(printf, 3, 4)))
fail(struct cfg_parser *p, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (p->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	smux__cfg_errorf(p->errbuf, p->errlen, p->cfg->path, line, "%s", msg);
	stop(p, -EINVAL);
}

static void fail_nomem(struct cfg_parser *p)
{
	if (p->failed)
		return;
	smux__cfg_errorf(p->errbuf, p->errlen, p->cfg->path, 0,
			 "out of memory");
	stop(p, -ENOMEM);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

/* @name as written when it is a plain word, else quoted. */
static const char *keyname(const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !(c >= '0' && c <= '9') && c != '_' && c != '-' && c != '.')
			return smux__cfg_quote(name, n, buf, len);
	}
	return name;
}

/* Line @lineno of the file as the reader would hand it over (no leading
 * blanks, no end of line), for messages about lines inih refused. */
static const char *file_line(const struct cfg_parser *p, int lineno, size_t *n)
{
	const char *s = p->buf, *end = p->buf + p->len, *nl;

	for (int i = 1; i < lineno && s < end; i++) {
		nl = memchr(s, '\n', (size_t)(end - s));
		s = nl ? nl + 1 : end;
	}
	nl = memchr(s, '\n', (size_t)(end - s));
	*n = nl ? (size_t)(nl - s) : (size_t)(end - s);
	if (lineno == 1 && *n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
		s += 3;
		*n -= 3;
	}
	while (*n && is_blank(*s)) {
		s++;
		(*n)--;
	}
	while (*n && is_blank(s[*n - 1]))
		(*n)--;
	return s;
}

static void fail_syntax(struct cfg_parser *p, int lineno)
{
	struct smux__cfg_section *s = NULL;
	char label[96] = "", q[SMUX__CFG_QUOTE_MAX];
	const char *text;
	size_t n;

	for (unsigned i = 0; i < p->cfg->n_secs; i++)
		if (p->cfg->secs[i]->line < lineno)
			s = p->cfg->secs[i];
	if (s) {
		char lb[80];

		snprintf(label, sizeof(label), "%s ",
			 smux__cfg_label(s, lb, sizeof(lb)));
	}
	text = file_line(p, lineno, &n);
	/* a later error may already be recorded: this one comes first */
	p->failed = false;
	fail(p, lineno, "%sexpected \"key = value\", got %s", label,
	     smux__cfg_quote(text, n, q, sizeof(q)));
}

/* Checks the section that has just ended (config_check.c). */
static void finish_section(struct cfg_parser *p)
{
	int rc;

	if (!p->cur || p->failed)
		return;
	rc = smux__cfg_check_section(p->cfg, p->cur, p->errbuf, p->errlen);
	if (rc)
		stop(p, rc);
}

static struct smux__cfg_section *section_add(struct cfg_parser *p,
					     enum smux__cfg_kind kind,
					     const char *name, size_t n)
{
	struct smux_config *cfg = p->cfg;
	struct smux__cfg_section *s, **secs;

	secs = realloc(cfg->secs,
		       (cfg->n_secs + 1) * sizeof(struct smux__cfg_section *));
	if (!secs)
		return NULL;
	cfg->secs = secs;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->kind = kind;
	s->line = p->lineno;
	s->opts = &cfg->opts;
	if (name && !(s->name = strndup(name, n))) {
		free(s);
		return NULL;
	}
	cfg->secs[cfg->n_secs++] = s;
	return s;
}

/* A "[kind name]" line of @n bytes (starting with '['). */
static void header(struct cfg_parser *p, const char *line, size_t n)
{
	const char *close = memchr(line, ']', n), *in, *rest, *name;
	size_t in_n, kind_n, name_n, rest_n;
	char q[SMUX__CFG_QUOTE_MAX];
	enum smux__cfg_kind kind;
	struct smux__cfg_section *old;

	finish_section(p);
	p->cur = NULL;
	if (p->failed)
		return;
	if (!close) {
		fail(p, p->lineno, "section header without \"]\": %s",
		     smux__cfg_quote(line, n, q, sizeof(q)));
		return;
	}
	rest = close + 1;
	rest_n = n - (size_t)(rest - line);
	while (rest_n && is_blank(*rest)) {
		rest++;
		rest_n--;
	}
	if (rest_n && *rest != ';' && *rest != '#') {
		fail(p, p->lineno, "text after the section header: %s",
		     smux__cfg_quote(rest, rest_n, q, sizeof(q)));
		return;
	}
	in = line + 1;
	in_n = (size_t)(close - in);
	while (in_n && is_blank(*in)) {
		in++;
		in_n--;
	}
	while (in_n && is_blank(in[in_n - 1]))
		in_n--;
	kind_n = 0;
	while (kind_n < in_n && !is_blank(in[kind_n]))
		kind_n++;
	name = in + kind_n;
	name_n = in_n - kind_n;
	while (name_n && is_blank(*name)) {
		name++;
		name_n--;
	}
	if (kind_n == 5 && memcmp(in, "mount", 5) == 0) {
		kind = SMUX__CFG_MOUNT;
	} else if (kind_n == 3 && memcmp(in, "mux", 3) == 0) {
		kind = SMUX__CFG_MUX;
	} else if (kind_n == 7 && memcmp(in, "backend", 7) == 0) {
		kind = SMUX__CFG_BACKEND;
	} else {
		smux__cfg_quote(in, in_n, q, sizeof(q));
		fail(p, p->lineno,
		     "unknown section [%.*s] (use [mount], [mux NAME] or "
		     "[backend NAME])",
		     (int)strlen(q) - 2, q + 1);
		return;
	}
	if (kind == SMUX__CFG_MOUNT) {
		if (name_n) {
			fail(p, p->lineno, "[mount] takes no name (got %s)",
			     smux__cfg_quote(name, name_n, q, sizeof(q)));
			return;
		}
		if (p->cfg->mount) {
			fail(p, p->lineno,
			     "duplicate section [mount] (first at line %d)",
			     p->cfg->mount->line);
			return;
		}
	} else if (name_n == 0) {
		fail(p, p->lineno, "[%.*s] needs a name: [%.*s NAME]",
		     (int)kind_n, in, (int)kind_n, in);
		return;
	} else if (!smux__cfg_name_ok(name, name_n)) {
		fail(p, p->lineno, "[%.*s] invalid name %s (" NAME_USE ")",
		     (int)kind_n, in,
		     smux__cfg_quote(name, name_n, q, sizeof(q)));
		return;
	} else {
		char tmp[SMUX__CFG_NAME_MAX + 1], label[96];

		memcpy(tmp, name, name_n);
		tmp[name_n] = '\0';
		old = smux__cfg_find(p->cfg, tmp);
		if (old) {
			fail(p, p->lineno,
			     "[%.*s %s] duplicate name (already used by %s at "
			     "line %d)",
			     (int)kind_n, in, tmp,
			     smux__cfg_label(old, label, sizeof(label)),
			     old->line);
			return;
		}
	}
	p->cur = section_add(p, kind, kind == SMUX__CFG_MOUNT ? NULL : name,
			     name_n);
	if (!p->cur)
		fail_nomem(p);
	else if (kind == SMUX__CFG_MOUNT)
		p->cfg->mount = p->cur;
}

/* The ini_reader: one line per call, see the file comment. */
static char *reader(char *str, int num, void *stream)
{
	struct cfg_parser *p = stream;
	const char *line, *nl;
	size_t n;

	if (p->failed)
		return NULL;
	if (p->pos >= p->len) {
		if (!p->at_eof) {
			p->at_eof = true;
			finish_section(p);
		}
		return NULL;
	}
	line = p->buf + p->pos;
	nl = memchr(line, '\n', p->len - p->pos);
	n = nl ? (size_t)(nl - line) : p->len - p->pos;
	p->pos += n + (nl ? 1 : 0);
	p->lineno++;
	if (p->lineno == 1 && n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) {
		line += 3;
		n -= 3;
	}
	if (memchr(line, '\0', n)) {
		fail(p, p->lineno, "NUL byte in the line");
		return NULL;
	}
	if (!smux__cfg_utf8_ok(line, n)) {
		fail(p, p->lineno,
		     "invalid UTF-8 (a configuration file is "
		     "UTF-8 text)");
		return NULL;
	}
	while (n && is_blank(*line)) {
		line++;
		n--;
	}
	while (n && is_blank(line[n - 1]))
		n--;
	if (n && line[0] == '[') {
		header(p, line, n);
		if (p->failed)
			return NULL;
		n = 0;
	} else if (num < 1 || n > (size_t)num - 1) {
		fail(p, p->lineno, "line too long (%zu bytes; at most %d)", n,
		     num > 1 ? num - 1 : 0);
		return NULL;
	}
	memcpy(str, line, n);
	str[n] = '\0';
	return str;
}

static int parse_names(struct cfg_parser *p, struct smux__cfg_section *s,
		       const char *value, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	const char *c = value;
	bool comma = false; /* a comma since the last name: one must follow */

	while (*c) {
		const char *w;
		size_t n;
		char **m;

		while (is_blank(*c))
			c++;
		if (*c == ',') {
			/* "a, b" and "a,b" list like "a b"; a comma stands
			 * between two names */
			if (comma || s->n_members == 0) {
				snprintf(why, len, "empty name between commas");
				return -EINVAL;
			}
			comma = true;
			c++;
			continue;
		}
		if (!*c)
			break;
		comma = false;
		w = c;
		while (*c && !is_blank(*c) && *c != ',')
			c++;
		n = (size_t)(c - w);
		if (!smux__cfg_name_ok(w, n)) {
			snprintf(why, len, "invalid name %s (" NAME_USE ")",
				 smux__cfg_quote(w, n, q, sizeof(q)));
			return -EINVAL;
		}
		for (unsigned i = 0; i < s->n_members; i++) {
			if (strlen(s->members[i]) == n &&
			    memcmp(s->members[i], w, n) == 0) {
				snprintf(why, len, "\"%s\" is listed twice",
					 s->members[i]);
				return -EINVAL;
			}
		}
		m = realloc(s->members, (s->n_members + 1) * sizeof(*m));
		if (!m)
			return -ENOMEM;
		s->members = m;
		m[s->n_members] = strndup(w, n);
		if (!m[s->n_members])
			return -ENOMEM;
		s->n_members++;
	}
	if (comma) {
		snprintf(why, len, "empty name after the last comma");
		return -EINVAL;
	}
	if (s->n_members == 0) {
		snprintf(why, len,
			 "empty list (name at least one [backend] "
			 "or [mux])");
		return -EINVAL;
	}
	return 0;
}

static int parse_type(const char *value, int64_t *out, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];

	for (int t = SMUX__CFG_T_FILE; t < SMUX__CFG_T_COUNT; t++) {
		const char *name = smux__cfg_type_name((enum smux__cfg_type)t);

		if (strcmp(value, name) != 0)
			continue;
		*out = t;
		return 0;
	}
	snprintf(why, len,
		 "unknown type %s (use file, memory, faulty, http, s3, swift "
		 "or bunny)",
		 smux__cfg_quote(value, strlen(value), q, sizeof(q)));
	return -EINVAL;
}

/* Parses @value for @def into @v; 0 or a negative errno with @why. */
static int parse_value(struct cfg_parser *p, struct smux__cfg_section *s,
		       const struct smux__cfg_keydef *def,
		       struct smux__cfg_value *v, const char *value, char *why,
		       size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	enum smux_mode mode;
	uid_t uid;
	gid_t gid;
	mode_t um;
	int rc;

	switch (def->vt) {
	case SMUX__VT_DURATION:
		return smux__cfg_parse_duration(value, &v->i, why, len);
	case SMUX__VT_SIZE:
		return smux__cfg_parse_size(value, &v->u, why, len);
	case SMUX__VT_BOOL:
		return smux__cfg_parse_bool(value, &v->b, why, len);
	case SMUX__VT_COUNT:
		return smux__cfg_parse_count(value, &v->u, why, len);
	case SMUX__VT_U64:
		return smux__cfg_parse_u64(value, &v->u, why, len);
	case SMUX__VT_RATE:
		return smux__cfg_parse_rate(value, &v->d, why, len);
	case SMUX__VT_WEIGHT:
		return smux__cfg_parse_weight(value, &v->d, why, len);
	case SMUX__VT_NAMES:
		return parse_names(p, s, value, why, len);
	case SMUX__VT_MODE:
		if (smux_mode_parse(value, &mode) != 0) {
			snprintf(why, len,
				 "unknown mode %s (use failover, round-robin, "
				 "weighted, sticky-by-key, shield, mirror)",
				 smux__cfg_quote(value, strlen(value), q,
						 sizeof(q)));
			return -EINVAL;
		}
		v->i = mode;
		return 0;
	case SMUX__VT_TYPE:
		return parse_type(value, &v->i, why, len);
	case SMUX__VT_UID:
		rc = smux__cfg_parse_uid(value, &uid, why, len);
		v->u = uid;
		return rc;
	case SMUX__VT_GID:
		rc = smux__cfg_parse_gid(value, &gid, why, len);
		v->u = gid;
		return rc;
	case SMUX__VT_UMASK:
		rc = smux__cfg_parse_umask(value, &um, why, len);
		v->u = um;
		return rc;
	case SMUX__VT_PREFIX:
		return smux__cfg_parse_prefix(value, &v->s, why, len);
	case SMUX__VT_AUTO:
		return smux__cfg_parse_auto(value, &v->i, why, len);
	case SMUX__VT_STRING:
	case SMUX__VT_ABSPATH:
	case SMUX__VT_NAME:
	default:
		break;
	}
	if (!value[0]) {
		snprintf(why, len, "empty value");
		return -EINVAL;
	}
	if (def->vt == SMUX__VT_ABSPATH &&
	    smux__cfg_parse_abspath(value, why, len) != 0)
		return -EINVAL;
	if (def->vt == SMUX__VT_NAME &&
	    !smux__cfg_name_ok(value, strlen(value))) {
		snprintf(why, len, "invalid name %s (" NAME_USE ")",
			 smux__cfg_quote(value, strlen(value), q, sizeof(q)));
		return -EINVAL;
	}
	v->s = strdup(value);
	return v->s ? 0 : -ENOMEM;
}

/* Durations of a mux that must be > 0 (0 would mean "the default"). */
static bool must_be_positive(const struct smux__cfg_section *s, int k)
{
	if (s->kind == SMUX__CFG_MOUNT)
		return k == SMUX__MK_BACKEND_TIMEOUT;
	return s->kind == SMUX__CFG_MUX &&
	       (k == SMUX__XK_BACKEND_TIMEOUT || k == SMUX__XK_COOLDOWN ||
		k == SMUX__XK_MAX_COOLDOWN);
}

/* The ini_handler: one key = value line of the current section. */
static int handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct cfg_parser *p = user;
	struct smux__cfg_section *s = p->cur;
	const struct smux__cfg_keydef *keys;
	char label[96], kq[SMUX__CFG_QUOTE_MAX], why[400];
	struct smux__cfg_value tmp = {0};
	const char *kn;
	unsigned nk, k;
	int rc;

	(void)section; /* ours is p->cur: see header() */
	if (p->failed)
		return 0;
	if (!name || !value)
		return 1;
	kn = keyname(name, kq, sizeof(kq));
	if (!s) {
		fail(p, p->lineno,
		     "%s: key outside any section (start with "
		     "[mount], [mux NAME] or [backend NAME])",
		     kn);
		return 0;
	}
	smux__cfg_label(s, label, sizeof(label));
	if (!name[0]) {
		fail(p, p->lineno, "%s expected \"key = value\", got no key",
		     label);
		return 0;
	}
	keys = smux__cfg_keys(s->kind, &nk);
	for (k = 0; k < nk; k++)
		if (strcmp(keys[k].name, name) == 0)
			break;
	if (k == nk) {
		fail(p, p->lineno, "%s %s: unknown key", label, kn);
		return 0;
	}
	if (s->kind == SMUX__CFG_BACKEND && s->v[SMUX__BK_TYPE].line &&
	    keys[k].types &&
	    !(keys[k].types & (1u << (unsigned)s->v[SMUX__BK_TYPE].i))) {
		fail(p, p->lineno, "%s %s: unknown key for type %s", label, kn,
		     smux__cfg_type_name(
			     (enum smux__cfg_type)s->v[SMUX__BK_TYPE].i));
		return 0;
	}
	if (s->v[k].line) {
		fail(p, p->lineno, "%s %s: set twice (first at line %d)", label,
		     kn, s->v[k].line);
		return 0;
	}
	rc = parse_value(p, s, &keys[k], &tmp, value, why, sizeof(why));
	if (rc == -ENOMEM) {
		fail_nomem(p);
		return 0;
	}
	if (rc) {
		fail(p, p->lineno, "%s %s: %s", label, kn, why);
		return 0;
	}
	if (must_be_positive(s, (int)k) && tmp.i == 0) {
		fail(p, p->lineno, "%s %s: must be more than 0", label, kn);
		return 0;
	}
	tmp.line = p->lineno;
	s->v[k] = tmp;
	return 1;
}

/* ---- loading ---- */

/* The whole file at @path into a NUL-terminated heap buffer. */
static int read_file(const char *path, char **buf, size_t *len, char *errbuf,
		     size_t errlen)
{
	size_t cap = 4096, n = 0;
	struct stat st;
	char *b, *nb;
	ssize_t r;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		smux__cfg_errorf(errbuf, errlen, path, 0, "cannot open: %s",
				 strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		smux__cfg_errorf(errbuf, errlen, path, 0, "cannot open: %s",
				 strerror(EISDIR));
		return -EISDIR;
	}
	b = malloc(cap + 1);
	if (!b)
		goto out_nomem;
	for (;;) {
		if (n == cap) {
			cap *= 2;
			nb = realloc(b, cap + 1);
			if (!nb)
				goto out_nomem;
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			smux__cfg_errorf(errbuf, errlen, path, 0,
					 "cannot read: %s", strerror(-rc));
			goto out_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > SMUX__CFG_FILE_MAX) {
			rc = smux__cfg_errorf(errbuf, errlen, path, 0,
					      "file too large (more than %u "
					      "bytes)",
					      SMUX__CFG_FILE_MAX);
			goto out_free;
		}
	}
	close(fd);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
out_nomem:
	smux__cfg_errorf(errbuf, errlen, path, 0, "out of memory");
	rc = -ENOMEM;
out_free:
	free(b);
	close(fd);
	return rc;
}

int smux_config_load(const char *path, struct smux_config **out, char *errbuf,
		     size_t errlen)
{
	struct cfg_parser p = {.errbuf = errbuf, .errlen = errlen};
	struct smux_config *cfg;
	char *buf = NULL;
	int rc;

	*out = NULL;
	if (errbuf && errlen)
		errbuf[0] = '\0';
	rc = read_file(path, &buf, &p.len, errbuf, errlen);
	if (rc)
		return rc;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg || !(cfg->path = strdup(path))) {
		free(cfg);
		free(buf);
		smux__cfg_errorf(errbuf, errlen, path, 0, "out of memory");
		return -ENOMEM;
	}
	p.cfg = cfg;
	p.buf = buf;
	rc = ini_parse_stream(reader, &p, handler, &p);
	if (rc == -2) {
		p.failed = false;
		fail_nomem(&p);
	} else if (rc > 0 && (!p.failed || rc < p.err_line)) {
		fail_syntax(&p, rc);
	}
	free(buf);
	rc = p.failed ? p.rc : smux__cfg_check(cfg, errbuf, errlen);
	if (rc == 0 && smux__cfg_fill_opts(cfg) != 0) {
		smux__cfg_errorf(errbuf, errlen, path, 0, "out of memory");
		rc = -ENOMEM;
	}
	if (rc) {
		smux_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}
