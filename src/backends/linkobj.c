/* SPDX-License-Identifier: MIT */
/*
 * linkobj.c - symlinks as NAME.rclonelink objects (smux/linkobj.h).
 *
 * Owns: the mapping between a symlink key "a" and its object
 * "a.rclonelink" in the inner backend, and nothing else: every call goes
 * to the inner backend through the smux_backend_* wrappers (keys checked,
 * errors completed there). A lookup of "a" asks "a" first and
 * "a.rclonelink" only when "a" is absent, so regular objects cost what
 * they did; an absent name costs a second head, and a delete a second
 * delete (the one extra request of this convention, as with rclone's
 * --links; docs/backends.md).
 *
 * Listings are read whole, renamed, sorted and deduplicated before the
 * caller sees them: "a.rclonelink" lists as "a", which sorts before "a-b"
 * though the object's name sorts after it. So a listing costs memory for
 * all its entries (a key and a struct smux_info each) until the caller
 * has seen them, even one that stops at the first: as the WebDAV backend
 * below, which gathers a directory's PROPFIND answer whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "smux/key.h"
#include "smux/linkobj.h"

#define LINK_SUFFIX_LEN (sizeof(SMUX_LINKOBJ_SUFFIX) - 1)

struct linkb {
	struct smux_backend base;   /* first: the generic part */
	struct smux_backend *inner; /* own reference; immutable */
};

static const struct smux_backend_ops linkb_ops;

/* Only ever called with an instance of linkb_ops (the ops table is
 * what sends calls here). */
static struct linkb *linkb_of(struct smux_backend *b)
{
	return b->ops == &linkb_ops ? (struct linkb *)b : NULL;
}

static bool is_dir_key(const char *key)
{
	size_t n = strlen(key);

	return n == 0 || key[n - 1] == '/';
}

/* A name only this wrapper writes: the object of a symlink, a last
 * segment of a name and the suffix ("d/.rclonelink" is not one: no name
 * before the suffix, as ".rclonelink" at the top is not). */
static bool is_link_object(const char *key)
{
	size_t n = strlen(key);

	return n > LINK_SUFFIX_LEN && key[n - LINK_SUFFIX_LEN - 1] != '/' &&
	       memcmp(key + n - LINK_SUFFIX_LEN, SMUX_LINKOBJ_SUFFIX,
		      LINK_SUFFIX_LEN) == 0;
}

/* "a" -> "a.rclonelink" in @out; KEY_TOO_LONG when that is no key (past
 * SMUX_KEY_MAX, or its last segment past SMUX_KEY_SEGMENT_MAX): then no
 * link object of @key can exist either. */
static int link_key(struct smux_backend *b, const char *key, char *out,
		    size_t cap, struct smux_error *err)
{
	const char *last = strrchr(key, '/');
	size_t seg = strlen(last ? last + 1 : key) + LINK_SUFFIX_LEN;
	int n = snprintf(out, cap, "%s%s", key, SMUX_LINKOBJ_SUFFIX);

	if (n < 0 || (size_t)n >= cap || seg > SMUX_KEY_SEGMENT_MAX)
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, b->name,
				      "\"%.200s\": too long with the suffix "
				      "%s that marks a symlink",
				      key, SMUX_LINKOBJ_SUFFIX);
	return 0;
}

static int absent(struct smux_backend *b, const char *key,
		  struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, b->name,
			      "no such key: %.200s", key);
}

static bool not_found(int rc, const struct smux_error *err)
{
	return rc < 0 && err->e.code == SMUX_E_KEY_NOT_FOUND;
}

/* @info of a link object read as the link. */
static void as_link(struct smux_info *info)
{
	if (info)
		info->mode = S_IFLNK | 0777;
}

/* One call on a key of the inner backend (head, get or setattr). */
typedef int (*keyed_fn)(struct smux_backend *inner, const char *key, void *arg,
			struct smux_error *err);

/* @call on @key, then, where @key is absent, on its link object (*@link
 * then true); absent when neither is there (the first answer). */
static int key_or_link(struct smux_backend *b, const char *key, keyed_fn call,
		       void *arg, bool *link, struct smux_error *err)
{
	struct linkb *l = linkb_of(b);
	char lk[SMUX_KEY_MAX + 1];
	struct smux_error e2 = {0};
	int rc, rc2;

	*link = false;
	if (is_link_object(key))
		return absent(b, key, err);
	rc = call(l->inner, key, arg, err);
	if (!not_found(rc, err) || is_dir_key(key) ||
	    link_key(b, key, lk, sizeof(lk), &e2) < 0)
		return rc;
	rc2 = call(l->inner, lk, arg, &e2);
	if (rc2 < 0) {
		if (e2.e.code == SMUX_E_KEY_NOT_FOUND)
			return rc;
		*err = e2;
		return rc2;
	}
	smux_error_clear(err);
	*link = true;
	return 0;
}

struct read_args {
	const struct smux_ctx *ctx;
	const struct smux_get_opts *opts; /* get only */
	struct smux_sink *sink;		  /* get only: NULL for a head */
	struct smux_info *info;
};

static int read_call(struct smux_backend *inner, const char *key, void *arg,
		     struct smux_error *err)
{
	struct read_args *r = arg;

	if (!r->sink)
		return smux_backend_head(inner, r->ctx, key, r->info, err);
	return smux_backend_get(inner, r->ctx, key, r->opts, r->sink, r->info,
				err);
}

/* A head or get of @key or its link object; a link's info says so. */
static int read_key(struct smux_backend *b, const char *key,
		    struct read_args *r, struct smux_error *err)
{
	bool link;
	int rc = key_or_link(b, key, read_call, r, &link, err);

	if (rc == 0 && link)
		as_link(r->info);
	return rc;
}

static int linkb_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	struct read_args r = {.ctx = ctx, .info = info};

	return read_key(b, key, &r, err);
}

static int linkb_get(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_get_opts *opts,
		     struct smux_sink *sink, struct smux_info *info,
		     struct smux_error *err)
{
	struct read_args r = {
		.ctx = ctx, .opts = opts, .sink = sink, .info = info};

	return read_key(b, key, &r, err);
}

static int linkb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_source *src,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct linkb *l = linkb_of(b);
	struct smux_put_opts o;
	char lk[SMUX_KEY_MAX + 1];
	int rc;

	if (!opts || (opts->mode & S_IFMT) != S_IFLNK) {
		struct smux_error e2 = {0};

		rc = smux_backend_put(l->inner, ctx, key, src, opts, info, err);
		/* over a link (a replay, another client's link): its object
		 * would show again once this one is renamed or removed; a
		 * create the caller saw absent has none to remove. Cleared
		 * without failing the put that happened (the regular object
		 * shows either way) */
		if (rc == 0 && !is_dir_key(key) &&
		    !(opts && (opts->flags & SMUX_PUT_NEW)) &&
		    link_key(b, key, lk, sizeof(lk), &e2) == 0)
			(void)smux_backend_del(l->inner, ctx, lk, &e2);
		return rc;
	}
	rc = link_key(b, key, lk, sizeof(lk), err);
	if (rc < 0)
		return rc;
	o = *opts;
	o.mode = S_IFREG | 0644;
	o.flags &= ~(unsigned)SMUX_PUT_MODE;
	rc = smux_backend_put(l->inner, ctx, lk, src, &o, info, err);
	if (rc < 0)
		return rc;
	/* a regular object of that name would hide the link: removed even
	 * after SMUX_PUT_NEW (another client may have made one since) */
	rc = smux_backend_del(l->inner, ctx, key, err);
	if (rc < 0)
		return rc;
	as_link(info);
	return 0;
}

/* Both names go: a link object left beside a regular one (another
 * client's) would show once the regular one is gone. */
static int linkb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_error *err)
{
	struct linkb *l = linkb_of(b);
	char lk[SMUX_KEY_MAX + 1];
	int rc;

	if (is_link_object(key))
		return 0; /* absent through the wrapper: removed */
	rc = smux_backend_del(l->inner, ctx, key, err);
	if (rc < 0 || is_dir_key(key) ||
	    link_key(b, key, lk, sizeof(lk), err) < 0) {
		if (rc == 0)
			smux_error_clear(err);
		return rc;
	}
	return smux_backend_del(l->inner, ctx, lk, err);
}

/* rename or copy (@move) of @src to @dst: the object of whichever of
 * the two @src names, to the same kind of name at @dst; the other kind
 * at @dst is removed so it cannot hide what arrived. */
static int transfer(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, bool move,
		    struct smux_error *err)
{
	struct linkb *l = linkb_of(b);
	char ls[SMUX_KEY_MAX + 1], ld[SMUX_KEY_MAX + 1];
	struct smux_error e2 = {0};
	int rc, rc2;

	if (is_link_object(src))
		return absent(b, src, err);
	rc = move ? smux_backend_rename(l->inner, ctx, src, dst, err)
		  : smux_backend_copy(l->inner, ctx, src, dst, err);
	if (is_dir_key(src) || is_dir_key(dst))
		return rc;
	if (link_key(b, dst, ld, sizeof(ld), &e2) < 0)
		return rc; /* no link object can be at @dst */
	if (rc == 0) {
		/* a regular object moved: what it leaves behind is cleared
		 * without failing the rename that happened (the regular
		 * object shows either way): a link object of @dst, and, on
		 * a move, one @src's name hid */
		if (smux_backend_del(l->inner, ctx, ld, &e2) == 0 && move &&
		    link_key(b, src, ls, sizeof(ls), &e2) == 0)
			(void)smux_backend_del(l->inner, ctx, ls, &e2);
		return 0;
	}
	if (!not_found(rc, err) || link_key(b, src, ls, sizeof(ls), &e2) < 0)
		return rc;
	rc2 = move ? smux_backend_rename(l->inner, ctx, ls, ld, &e2)
		   : smux_backend_copy(l->inner, ctx, ls, ld, &e2);
	if (rc2 < 0) {
		if (e2.e.code == SMUX_E_KEY_NOT_FOUND)
			return rc; /* neither name: the first answer */
		*err = e2;
		return rc2;
	}
	smux_error_clear(err);
	/* a link moved: the regular object of @dst would hide it */
	return smux_backend_del(l->inner, ctx, dst, err);
}

static int linkb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	return transfer(b, ctx, src, dst, false, err);
}

static int linkb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	return transfer(b, ctx, src, dst, true, err);
}

struct setattr_args {
	const struct smux_ctx *ctx;
	const struct smux_setattr *attr;
};

static int setattr_call(struct smux_backend *inner, const char *key, void *arg,
			struct smux_error *err)
{
	struct setattr_args *a = arg;

	return smux_backend_setattr(inner, a->ctx, key, a->attr, err);
}

static int linkb_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const struct smux_setattr *attr,
			 struct smux_error *err)
{
	struct setattr_args a = {.ctx = ctx, .attr = attr};
	bool link;

	return key_or_link(b, key, setattr_call, &a, &link, err);
}

/* ---- list ---- */

struct list_item {
	char *key;
	bool is_prefix;
	bool is_link;
	struct smux_info info;
};

struct list_acc {
	const char *prefix;
	struct list_item *items;
	size_t n, cap;
	bool oom;
};

static int acc_entry(void *arg, const struct smux_list_entry *e)
{
	struct list_acc *a = arg;
	struct list_item *it;
	bool link = !e->is_prefix && is_link_object(e->key);
	size_t len = strlen(e->key);

	if (link)
		len -= LINK_SUFFIX_LEN;
	/* "a.rc" matched "a.rclonelink", not the link "a" */
	if (strncmp(e->key, a->prefix, strlen(a->prefix)) != 0 ||
	    len < strlen(a->prefix))
		return 0;
	/* "x.rclonelink.rclonelink" (another client's): the link would be
	 * "x.rclonelink", a name that reads as absent here */
	if (link && len > LINK_SUFFIX_LEN &&
	    memcmp(e->key + len - LINK_SUFFIX_LEN, SMUX_LINKOBJ_SUFFIX,
		   LINK_SUFFIX_LEN) == 0 &&
	    e->key[len - LINK_SUFFIX_LEN - 1] != '/')
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct list_item *v = realloc(a->items, cap * sizeof(*v));

		if (!v) {
			a->oom = true;
			return 1;
		}
		a->items = v;
		a->cap = cap;
	}
	it = &a->items[a->n];
	it->key = strndup(e->key, len);
	if (!it->key) {
		a->oom = true;
		return 1;
	}
	it->is_prefix = e->is_prefix;
	it->is_link = link;
	it->info = e->info;
	if (link)
		as_link(&it->info);
	a->n++;
	return 0;
}

/* By key; of one key, the regular object first (it is what shows). */
static int item_cmp(const void *x, const void *y)
{
	const struct list_item *a = x, *b = y;
	int c = strcmp(a->key, b->key);

	return c ? c : (int)a->is_link - (int)b->is_link;
}

static int linkb_list(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *prefix, const char *delimiter,
		      smux_list_fn fn, void *arg, struct smux_error *err)
{
	struct linkb *l = linkb_of(b);
	struct list_acc a = {.prefix = prefix ? prefix : ""};
	int rc;

	rc = smux_backend_list(l->inner, ctx, prefix, delimiter, acc_entry, &a,
			       err);
	if (rc == 0 && a.oom)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				    "listing \"%.200s\"", a.prefix);
	if (rc == 0 && a.n)
		qsort(a.items, a.n, sizeof(a.items[0]), item_cmp);
	for (size_t i = 0; rc == 0 && i < a.n; i++) {
		struct smux_list_entry e = {
			.key = a.items[i].key,
			.is_prefix = a.items[i].is_prefix,
			.info = a.items[i].info,
		};

		if (i > 0 && strcmp(a.items[i - 1].key, e.key) == 0)
			continue; /* a link hidden by its regular namesake */
		if (fn(arg, &e) != 0)
			break;
	}
	for (size_t i = 0; i < a.n; i++)
		free(a.items[i].key);
	free(a.items);
	return rc;
}

/* ---- the rest goes through ---- */

static int linkb_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *const *keys, size_t n, int *rcs,
			  struct smux_error *err)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct smux_error e = {0};

		rcs[i] = linkb_del(b, ctx, keys[i], &e);
		if (rcs[i] < 0 && rc == 0) {
			rc = rcs[i];
			*err = e;
		}
	}
	return rc;
}

static int linkb_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *x, const char *y, struct smux_error *err)
{
	return smux_backend_exchange(linkb_of(b)->inner, ctx, x, y, err);
}

static int linkb_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			     struct smux_error *err)
{
	return smux_backend_healthcheck(linkb_of(b)->inner, ctx, err);
}

static int linkb_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
			struct smux_statfs *out, struct smux_error *err)
{
	return smux_backend_statfs(linkb_of(b)->inner, ctx, out, err);
}

static int linkb_sync(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err)
{
	return smux_backend_sync(linkb_of(b)->inner, ctx, key, err);
}

static int linkb_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, unsigned flags,
			     struct smux_writer **out, struct smux_error *err)
{
	return smux_backend_writer_open(linkb_of(b)->inner, ctx, key, flags,
					out, err);
}

static int linkb_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, struct smux_reader **out,
			     struct smux_error *err)
{
	if (is_link_object(key)) {
		*out = NULL;
		return absent(b, key, err);
	}
	return smux_backend_reader_open(linkb_of(b)->inner, ctx, key, out, err);
}

static unsigned linkb_caps(struct smux_backend *b)
{
	/* a del here is two requests: no batch of them; symlinks are
	 * NAME.rclonelink objects */
	return (smux_backend_caps(linkb_of(b)->inner) &
		~(unsigned)(SMUX_CAP_DEL_MANY | SMUX_CAP_INLINE)) |
	       SMUX_CAP_SYMLINK;
}

/* A link's object name is longer than the link's by the suffix. */
static size_t linkb_key_max(struct smux_backend *b)
{
	size_t m = smux_backend_key_max(linkb_of(b)->inner);

	return m > LINK_SUFFIX_LEN ? m - LINK_SUFFIX_LEN : 1;
}

static bool linkb_key_refused(struct smux_backend *b, const char *key)
{
	(void)b;
	return is_link_object(key);
}

static void linkb_destroy(struct smux_backend *b)
{
	struct linkb *l = linkb_of(b);

	smux_backend_unref(l->inner);
	smux_backend_release(&l->base);
	free(l);
}

static const struct smux_backend_ops linkb_ops = {
	.kind = "linkobj",
	.get = linkb_get,
	.put = linkb_put,
	.del = linkb_del,
	.head = linkb_head,
	.list = linkb_list,
	.del_many = linkb_del_many,
	.copy = linkb_copy,
	.rename = linkb_rename,
	.setattr = linkb_setattr,
	.healthcheck = linkb_healthcheck,
	.statfs = linkb_statfs,
	.writer_open = linkb_writer_open,
	.reader_open = linkb_reader_open,
	.caps = linkb_caps,
	.key_max = linkb_key_max,
	.key_refused = linkb_key_refused,
	.sync = linkb_sync,
	.exchange = linkb_exchange,
	.destroy = linkb_destroy,
};

int smux_linkobj_new(struct smux_backend *inner, struct smux_backend **out,
		     struct smux_error *err)
{
	struct linkb *l;

	*out = NULL;
	if (!inner)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "linkobj without a backend to wrap");
	l = calloc(1, sizeof(*l));
	if (!l || smux_backend_init(&l->base, &linkb_ops, inner->name) < 0) {
		free(l);
		return smux_error_set(err, SMUX_E_NO_MEMORY, inner->name, NULL);
	}
	l->base.depth = inner->depth;
	l->inner = smux_backend_ref(inner);
	*out = &l->base;
	return 0;
}
