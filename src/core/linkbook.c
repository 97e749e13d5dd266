/* SPDX-License-Identifier: MIT */
/*
 * linkbook.c - the book of hard links made through a mux (linkbook.h).
 *
 * In memory: a hash table of names, each with the indices of the links
 * that name it, and the links in the order they were made (a dead one
 * has no names), so the newest are the ones kept when the book is full.
 *
 * On disk: <state_dir>/<mux>.links, one JSON record a line, appended as
 * the book changes and read again at open in that order:
 *   {"op":"link","a":KEY,"b":KEY}
 *   {"op":"rename","from":KEY,"to":KEY}
 *   {"op":"forget","key":KEY}
 * (a key that is not UTF-8 as "<field>_hex", jbytes.h). Records are
 * written, not synced: a program's `ln` asks no disk flush, and a record
 * lost to a power cut only makes the book know less. A bad or unfinished
 * record (a crash mid-write, a damaged file) ends the book: the file is
 * cut there, so later records are whole, and the open says so. The file
 * is rewritten (a temporary file renamed over it) with one record per
 * link when renames and deletes made it much longer than the book.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jbytes.h"
#include "core/linkbook.h"
#include "smux/key.h"

#define LB_SUFFIX     ".links"
#define LB_TMP_SUFFIX ".links.tmp"
/* The file is rewritten once it holds this many records more than twice
 * the links the book keeps. */
#define LB_SLACK 4096
/* The book is compacted (dead links and names without links dropped)
 * once it holds this many more of either than twice the live links. */
#define LB_DEAD_SLACK 1024

struct lb_name {
	char *key;
	struct lb_name *next; /* hash chain */
	size_t *links;	      /* indices of the live links that name it */
	unsigned n, cap;
	unsigned mark; /* the last group walk that reached it */
};

struct lb_link {
	struct lb_name *a, *b; /* NULL: dead */
};

struct lb_table {
	struct lb_name **buckets;
	size_t nbuckets, nnames;
	struct lb_link *links;
	size_t nlinks, links_cap; /* made, dead ones included */
	size_t live;
};

struct smux__linkbook {
	pthread_mutex_t mu;
	size_t cap; /* the most links kept */
	struct lb_table t;
	unsigned mark;
	char *path, *tmp_path; /* NULL: in memory only */
	int fd;
	size_t records; /* in the file */
	off_t size;	/* of the file, its records whole */
};

/* ---- memory ---- */

static uint64_t hash_key(const char *key)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * UINT64_C(0x100000001b3);
	return h;
}

static struct lb_name **bucket_of(struct lb_table *t, const char *key)
{
	return &t->buckets[hash_key(key) & (t->nbuckets - 1)];
}

static struct lb_name *name_find(struct lb_table *t, const char *key)
{
	if (!t->nbuckets)
		return NULL;
	for (struct lb_name *n = *bucket_of(t, key); n; n = n->next)
		if (strcmp(n->key, key) == 0)
			return n;
	return NULL;
}

static void name_hash(struct lb_table *t, struct lb_name *n)
{
	struct lb_name **b = bucket_of(t, n->key);

	n->next = *b;
	*b = n;
}

static void name_unhash(struct lb_table *t, struct lb_name *n)
{
	struct lb_name **p = bucket_of(t, n->key);

	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
}

/* Doubles the buckets when the names outnumber them: 0, or -1. */
static int table_grow(struct lb_table *t)
{
	size_t nb = t->nbuckets ? t->nbuckets * 2 : 256;
	struct lb_name **old = t->buckets;
	size_t oldn = t->nbuckets;

	if (t->nnames < t->nbuckets)
		return 0;
	t->buckets = calloc(nb, sizeof(struct lb_name *));
	if (!t->buckets) {
		t->buckets = old;
		return oldn ? 0 : -1; /* longer chains, still right */
	}
	t->nbuckets = nb;
	for (size_t i = 0; i < oldn; i++)
		for (struct lb_name *n = old[i], *next; n; n = next) {
			next = n->next;
			name_hash(t, n);
		}
	free(old);
	return 0;
}

/* @key's name, made when new; NULL without memory. */
static struct lb_name *name_get(struct lb_table *t, const char *key)
{
	struct lb_name *n = name_find(t, key);

	if (n)
		return n;
	if (table_grow(t) != 0)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n || !(n->key = strdup(key))) {
		free(n);
		return NULL;
	}
	name_hash(t, n);
	t->nnames++;
	return n;
}

static void name_free(struct lb_name *n)
{
	free(n->key);
	free(n->links);
	free(n);
}

static int name_push(struct lb_name *n, size_t link)
{
	if (n->n == n->cap) {
		unsigned cap = n->cap ? n->cap * 2 : 2;
		size_t *l = realloc(n->links, cap * sizeof(*l));

		if (!l)
			return -1;
		n->links = l;
		n->cap = cap;
	}
	n->links[n->n++] = link;
	return 0;
}

static void name_pull(struct lb_name *n, size_t link)
{
	for (unsigned i = 0; i < n->n; i++)
		if (n->links[i] == link) {
			n->links[i] = n->links[--n->n];
			return;
		}
}

/* The name at the other end of @n's @i-th link. */
static struct lb_name *other_end(struct lb_table *t, struct lb_name *n,
				 unsigned i)
{
	struct lb_link *l = &t->links[n->links[i]];

	return l->a == n ? l->b : l->a;
}

/* Links @a and @b (once). 0, or -1 without memory. */
static int link_add(struct lb_table *t, struct lb_name *a, struct lb_name *b)
{
	struct lb_name *few = a->n <= b->n ? a : b, *many = few == a ? b : a;

	if (a == b)
		return 0;
	/* once: the name of fewer links is searched (a file of thousands
	 * of names is linked name by name to one of them) */
	for (unsigned i = 0; i < few->n; i++)
		if (other_end(t, few, i) == many)
			return 0;
	if (t->nlinks == t->links_cap) {
		size_t cap = t->links_cap ? t->links_cap * 2 : 256;
		struct lb_link *l = realloc(t->links, cap * sizeof(*l));

		if (!l)
			return -1;
		t->links = l;
		t->links_cap = cap;
	}
	if (name_push(a, t->nlinks) != 0)
		return -1;
	if (name_push(b, t->nlinks) != 0) {
		a->n--;
		return -1;
	}
	t->links[t->nlinks++] = (struct lb_link){a, b};
	t->live++;
	return 0;
}

static void name_remove(struct lb_table *t, struct lb_name *n)
{
	name_unhash(t, n);
	t->nnames--;
	name_free(n);
}

/* Removes the name @n (only it: a caller may hold others); the names it
 * linked stay linked to each other, to the first of them. One left
 * without links stays until the next compaction (maybe_compact). */
static void name_drop(struct lb_table *t, struct lb_name *n)
{
	struct lb_name *first = NULL;

	while (n->n) {
		/* the last of @n's links: no search on @n's side */
		size_t link = n->links[--n->n];
		struct lb_name *o = t->links[link].a == n ? t->links[link].b
							  : t->links[link].a;

		name_pull(o, link);
		t->links[link].a = t->links[link].b = NULL;
		t->live--;
		if (!first)
			first = o;
		else
			(void)link_add(t, first,
				       o); /* no memory: it knows less */
	}
	name_remove(t, n);
}

/* Gives @n the key @key (rehashed); a name @key had is dropped first. */
static void name_rekey(struct lb_table *t, struct lb_name *n, const char *key)
{
	struct lb_name *old = name_find(t, key);
	char *k;

	if (old == n)
		return;
	if (old)
		name_drop(t, old);
	k = strdup(key);
	if (!k) {
		name_drop(t, n); /* not under a name it no longer has */
		return;
	}
	name_unhash(t, n);
	free(n->key);
	n->key = k;
	name_hash(t, n);
}

static void table_free(struct lb_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct lb_name *n = t->buckets[i], *next; n; n = next) {
			next = n->next;
			name_free(n);
		}
	free(t->buckets);
	free(t->links);
	*t = (struct lb_table){0};
}

/* Keeps the newest @keep live links of @t, in their order. */
static void table_trim(struct lb_table *t, size_t keep)
{
	struct lb_table nt = {0};
	size_t from = t->nlinks, seen = 0;

	while (from > 0 && seen < keep)
		if (t->links[--from].a)
			seen++;
	for (size_t i = from; i < t->nlinks; i++) {
		struct lb_link *l = &t->links[i];
		struct lb_name *a, *b;

		if (!l->a)
			continue;
		a = name_get(&nt, l->a->key);
		b = a ? name_get(&nt, l->b->key) : NULL;
		if (b)
			(void)link_add(&nt, a, b);
	}
	table_free(t);
	*t = nt;
}

/* ---- changes, as a record says them ---- */

/* Drops the dead links and the names without links once they are many
 * (links made and forgotten: git's object writes, a mail delivery). */
static void maybe_compact(struct lb_table *t)
{
	if (t->nlinks > 2 * t->live + LB_DEAD_SLACK ||
	    t->nnames > 2 * t->live + LB_DEAD_SLACK)
		table_trim(t, t->live);
}

static void apply_link(struct smux__linkbook *lb, const char *a, const char *b)
{
	struct lb_name *na, *nb;

	if (strcmp(a, b) == 0) /* a record can say it: no link */
		return;
	na = name_get(&lb->t, a);
	nb = na ? name_get(&lb->t, b) : NULL;
	if (nb)
		(void)link_add(&lb->t, na, nb);
	/* a name left without links (no memory for one) is no use */
	if (na && !na->n)
		name_remove(&lb->t, na);
	if (nb && !nb->n)
		name_remove(&lb->t, nb);
	if (lb->t.live > lb->cap)
		table_trim(&lb->t, lb->cap / 2);
	maybe_compact(&lb->t);
}

/* Whether @key is under the directory @dir ("d/"). */
static bool under(const char *key, const char *dir, size_t ndir)
{
	return strncmp(key, dir, ndir) == 0;
}

/* Names under @dir into a new array (*@n of them); NULL without memory. */
static struct lb_name **names_under(struct lb_table *t, const char *dir,
				    size_t *n)
{
	size_t ndir = strlen(dir);
	struct lb_name **v = malloc((t->nnames + 1) * sizeof(struct lb_name *));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct lb_name *nm = t->buckets[i]; nm; nm = nm->next)
			if (under(nm->key, dir, ndir))
				v[(*n)++] = nm;
	return v;
}

/* Returns whether a name of the book was touched. */
static bool apply_rename(struct smux__linkbook *lb, const char *from,
			 const char *to)
{
	struct lb_table *t = &lb->t;
	size_t nfrom = strlen(from), nto = strlen(to), n;
	struct lb_name **v;
	bool touched;

	if (strcmp(from, to) == 0) /* a record can say it: no move */
		return false;
	if (!smux_key_is_dir(from)) {
		struct lb_name *nf = name_find(t, from), *nt = name_find(t, to);

		if (nf)
			name_rekey(t, nf, to);
		else if (nt)
			name_drop(t, nt);
		maybe_compact(t);
		return nf || nt;
	}
	/* names under @to are of files gone: a directory is renamed over an
	 * empty one only (and never into itself: then both sets go) */
	v = names_under(t, to, &n);
	if (!v)
		return false;
	touched = n > 0;
	for (size_t i = 0; i < n; i++)
		name_drop(t, v[i]);
	free(v);
	v = names_under(t, from, &n);
	if (!v)
		return touched;
	touched |= n > 0;
	for (size_t i = 0; i < n; i++) {
		char key[SMUX_KEY_MAX + 1];
		const char *rest = v[i]->key + nfrom;

		if (under(to, from, nfrom) ||
		    nto + strlen(rest) > SMUX_KEY_MAX) {
			name_drop(t, v[i]);
			continue;
		}
		snprintf(key, sizeof(key), "%s%s", to, rest);
		name_rekey(t, v[i], key);
	}
	free(v);
	maybe_compact(t);
	return touched;
}

static void apply_forget(struct smux__linkbook *lb, const char *key)
{
	struct lb_name *n = name_find(&lb->t, key);

	if (n)
		name_drop(&lb->t, n);
	maybe_compact(&lb->t);
}

/* ---- the file ---- */

/* Appends @o's record (taken) to the file; a failed write is cut off. */
static void record_write(struct smux__linkbook *lb, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	size_t len;

	json_decref(o);
	if (!s || lb->fd < 0) {
		free(s);
		return;
	}
	len = strlen(s);
	s[len++] = '\n'; /* over the NUL: the record's end */
	if (write(lb->fd, s, len) == (ssize_t)len) {
		lb->size += (off_t)len;
		lb->records++;
	} else if (ftruncate(lb->fd, lb->size) != 0) {
		/* the next record would follow a torn one: stop writing */
		close(lb->fd);
		lb->fd = -1;
	}
	free(s);
}

static json_t *record2(const char *op, const char *f1, const char *v1,
		       const char *f2, const char *v2)
{
	json_t *o = json_object();

	if (!o || json_object_set_new(o, "op", json_string(op)) ||
	    smux__jbytes_set(o, f1, v1) ||
	    (f2 && smux__jbytes_set(o, f2, v2))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Writes the book as one link record a link into a new file renamed over
 * the old one. On failure the old file stays as it was. */
static void file_rewrite(struct smux__linkbook *lb)
{
	struct lb_table *t = &lb->t;
	int fd, saved = lb->fd;
	off_t size = lb->size;
	size_t records = lb->records;
	bool ok = true;

	fd = open(lb->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	lb->fd = fd;
	lb->size = 0;
	lb->records = 0;
	for (size_t i = 0; i < t->nlinks && ok; i++) {
		off_t before = lb->size;

		if (!t->links[i].a)
			continue;
		record_write(lb, record2("link", "a", t->links[i].a->key, "b",
					 t->links[i].b->key));
		ok = lb->fd >= 0 && lb->size > before;
	}
	if (ok && fdatasync(fd) == 0 && rename(lb->tmp_path, lb->path) == 0) {
		close(fd);
		close(saved);
		lb->fd = open(lb->path, O_WRONLY | O_APPEND | O_CLOEXEC);
		return;
	}
	if (lb->fd >= 0)
		close(lb->fd);
	(void)unlink(lb->tmp_path);
	lb->fd = saved;
	lb->size = size;
	lb->records = records;
}

static void maybe_rewrite(struct smux__linkbook *lb)
{
	if (lb->path && lb->records > 2 * lb->t.live + LB_SLACK)
		file_rewrite(lb);
}

/* Applies the record @o: 0, or -1 with @why when it is not one. */
static int apply_record(struct smux__linkbook *lb, json_t *o, char *why,
			size_t whylen)
{
	static const struct {
		const char *op, *f1, *f2;
	} ops[] = {{"link", "a", "b"},
		   {"rename", "from", "to"},
		   {"forget", "key", NULL}};
	const char *op = json_string_value(json_object_get(o, "op"));
	const char *f1 = NULL, *f2 = NULL;
	char *v1 = NULL, *v2 = NULL;
	struct smux_error e;
	bool rename;
	int rc = -1;

	for (size_t i = 0; op && i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i].op) == 0) {
			f1 = ops[i].f1;
			f2 = ops[i].f2;
		}
	if (!f1) {
		snprintf(why, whylen, "not a link, rename or forget record");
		return -1;
	}
	rename = strcmp(op, "rename") == 0;
	unsigned flags = rename ? SMUX_KEY_ALLOW_DIR : SMUX_KEY_OBJECT;

	if (smux__jbytes_get(o, f1, &v1, why, whylen) != 0 ||
	    (f2 && smux__jbytes_get(o, f2, &v2, why, whylen) != 0))
		goto out;
	if (smux_key_check(v1, flags, NULL, &e) != 0 ||
	    (v2 && smux_key_check(v2, flags, NULL, &e) != 0) ||
	    (rename && smux_key_is_dir(v1) != smux_key_is_dir(v2))) {
		snprintf(why, whylen, "not a key in \"%s\"", op);
		goto out;
	}
	rc = 0;
	if (rename)
		(void)apply_rename(lb, v1, v2);
	else if (v2)
		apply_link(lb, v1, v2);
	else
		apply_forget(lb, v1);
out:
	free(v1);
	free(v2);
	return rc;
}

/* Reads the file's records; a bad one and what follows are cut off. */
static void file_load(struct smux__linkbook *lb, char *why, size_t whylen)
{
	int fd = open(lb->path, O_RDONLY | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	char *line = NULL, reason[160] = "";
	size_t cap = 0;
	unsigned lineno = 0;
	ssize_t n;

	if (!f) {
		if (fd >= 0)
			close(fd);
		snprintf(why, whylen, "%s: cannot read: %s", lb->path,
			 strerror(errno));
		return;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		json_error_t je;
		json_t *o;

		lineno++;
		if (line[n - 1] != '\n') {
			snprintf(reason, sizeof(reason),
				 "an unfinished record");
			break;
		}
		o = json_loadb(line, (size_t)n - 1, JSON_REJECT_DUPLICATES,
			       &je);
		if (!o) {
			snprintf(reason, sizeof(reason), "%s", je.text);
			break;
		}
		if (apply_record(lb, o, reason, sizeof(reason)) != 0) {
			json_decref(o);
			if (!reason[0])
				snprintf(reason, sizeof(reason),
					 "out of memory");
			break;
		}
		json_decref(o);
		lb->size += n;
		lb->records++;
	}
	free(line);
	fclose(f);
	if (reason[0]) {
		snprintf(why, whylen,
			 "%s line %u: %s: the book is cut there (the links "
			 "recorded after it are forgotten)",
			 lb->path, lineno, reason);
		/* later records must follow whole ones, or none at all */
		if (lb->fd >= 0 && ftruncate(lb->fd, lb->size) != 0) {
			close(lb->fd);
			lb->fd = -1;
		}
	}
}

/* ---- the API ---- */

struct smux__linkbook *smux__linkbook_open(const char *state_dir,
					   const char *mux_name, size_t cap,
					   char *why, size_t whylen)
{
	struct smux__linkbook *lb = calloc(1, sizeof(*lb));

	if (why && whylen)
		why[0] = '\0';
	if (!lb)
		return NULL;
	lb->fd = -1;
	lb->cap = cap < 2 ? 2 : cap;
	if (pthread_mutex_init(&lb->mu, NULL) != 0) {
		free(lb);
		return NULL;
	}
	if (!state_dir)
		return lb;
	if (asprintf(&lb->path, "%s/%s" LB_SUFFIX, state_dir, mux_name) < 0 ||
	    asprintf(&lb->tmp_path, "%s/%s" LB_TMP_SUFFIX, state_dir,
		     mux_name) < 0) {
		smux__linkbook_close(lb);
		return NULL;
	}
	(void)unlink(lb->tmp_path); /* a rewrite's, cut by a crash */
	lb->fd =
		open(lb->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (lb->fd < 0) {
		snprintf(why, whylen, "%s: %s: links are kept in memory only",
			 lb->path, strerror(errno));
		return lb;
	}
	file_load(lb, why, whylen);
	maybe_rewrite(lb);
	return lb;
}

void smux__linkbook_close(struct smux__linkbook *lb)
{
	if (!lb)
		return;
	if (lb->fd >= 0)
		close(lb->fd);
	table_free(&lb->t);
	free(lb->path);
	free(lb->tmp_path);
	pthread_mutex_destroy(&lb->mu);
	free(lb);
}

void smux__linkbook_link(struct smux__linkbook *lb, const char *a,
			 const char *b)
{
	if (!lb || strcmp(a, b) == 0)
		return;
	pthread_mutex_lock(&lb->mu);
	apply_link(lb, a, b);
	record_write(lb, record2("link", "a", a, "b", b));
	maybe_rewrite(lb);
	pthread_mutex_unlock(&lb->mu);
}

void smux__linkbook_rename(struct smux__linkbook *lb, const char *from,
			   const char *to)
{
	if (!lb || strcmp(from, to) == 0 ||
	    smux_key_is_dir(from) != smux_key_is_dir(to))
		return;
	pthread_mutex_lock(&lb->mu);
	/* a rename that touches no name in the book leaves no record */
	if (apply_rename(lb, from, to)) {
		record_write(lb, record2("rename", "from", from, "to", to));
		maybe_rewrite(lb);
	}
	pthread_mutex_unlock(&lb->mu);
}

void smux__linkbook_forget(struct smux__linkbook *lb, const char *key)
{
	struct lb_name *n;

	if (!lb)
		return;
	pthread_mutex_lock(&lb->mu);
	n = name_find(&lb->t, key);
	if (n) {
		apply_forget(lb, key);
		record_write(lb, record2("forget", "key", key, NULL, NULL));
		maybe_rewrite(lb);
	}
	pthread_mutex_unlock(&lb->mu);
}

unsigned smux__linkbook_group(struct smux__linkbook *lb, const char *key,
			      char **out, unsigned max)
{
	struct lb_name **queue;
	/* every name queued but the first is returned: max + 1 at most */
	unsigned head = 0, tail = 0, got = 0, bound = max + 1;
	struct lb_name *start;

	if (!lb || !max)
		return 0;
	queue = malloc(bound * sizeof(struct lb_name *));
	if (!queue)
		return 0;
	pthread_mutex_lock(&lb->mu);
	start = name_find(&lb->t, key);
	if (start) {
		start->mark = ++lb->mark;
		queue[tail++] = start;
	}
	while (head < tail && got < max) {
		struct lb_name *n = queue[head++];

		for (unsigned i = 0; i < n->n && got < max && tail < bound;
		     i++) {
			struct lb_name *o = other_end(&lb->t, n, i);

			if (o->mark == lb->mark)
				continue;
			o->mark = lb->mark;
			queue[tail++] = o;
			out[got] = strdup(o->key);
			if (out[got])
				got++;
		}
	}
	pthread_mutex_unlock(&lb->mu);
	free(queue);
	return got;
}
