// SPDX-License-Identifier: MIT
/*
 * bunny_put.c - the bunny backend's writes: put (hashed, with the
 * Checksum header; mkdir as PUT dir/) and del (never a recursive DELETE
 * of a directory for a file key or a non-empty marker).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "backends/bunny_internal.h"
#include "backends/http_client.h"

/* ---- put ---- */

/* The uppercase hex SHA-256 of @src into @hex (65 bytes), read in chunks
 * under @ctx. */
static int hash_source(struct bunnyb *z, const struct smux_ctx *ctx,
		       const struct smux_source *src, char *hex,
		       struct smux_error *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *mc = EVP_MD_CTX_new();
	size_t cap = src->length < SMUX_IO_CHUNK ? (size_t)src->length + 1
						 : SMUX_IO_CHUNK;
	unsigned char *buf = malloc(cap);
	uint64_t pos = 0;
	int rc = 0;

	if (!mc || !buf || !EVP_DigestInit_ex(mc, EVP_sha256(), NULL)) {
		rc = smux__bunny_nomem(z, err);
		goto out;
	}
	while (pos < src->length) {
		long n;

		rc = smux_ctx_check(ctx, smux__bunny_name(z), err);
		if (rc < 0)
			goto out;
		n = smux_source_read(src, pos, buf, cap);
		if (n <= 0) {
			rc = n < 0 ? (int)n : -EIO;
			smux_error_set(err, SMUX_E_IO, smux__bunny_name(z),
				       "reading the body to hash it: %s",
				       strerror(-rc));
			rc = smux_error_make_local(err, -rc);
			goto out;
		}
		EVP_DigestUpdate(mc, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	EVP_DigestFinal_ex(mc, md, &mdlen);
	smux__bunny_hex(md, mdlen, hex);
out:
	EVP_MD_CTX_free(mc);
	free(buf);
	return rc;
}

/*
 * After a PUT answered 400: what is in the way, if anything. IS_DIRECTORY
 * when @key is a directory, NOT_DIRECTORY when a directory above it is a
 * file; 0 when nothing is (the 400 was about the body).
 */
static int put_in_the_way(struct bunnyb *z, const struct smux_ctx *ctx,
			  const char *key, struct smux_error *err)
{
	char up[SMUX_KEY_MAX + 1];
	struct smux__bunny_obj o;
	struct smux_error e2 = {0};
	size_t kl = strlen(key);
	int rc;

	if (smux__bunny_key_is_dir(key) && kl)
		kl--;
	/* the ancestors, shallowest first: a file among them is in the way */
	for (size_t i = 0; i < kl && i < sizeof(up) - 1; i++) {
		if (key[i] != '/')
			continue;
		memcpy(up, key, i);
		up[i] = '\0';
		rc = smux__bunny_describe(z, ctx, up, &o, &e2);
		if (rc == -ENOENT)
			break; /* nothing below an absent one */
		if (rc < 0)
			return 0;
		free(o.name);
		if (!o.is_dir)
			return smux_error_set(
				err, SMUX_E_NOT_DIRECTORY, smux__bunny_name(z),
				"put \"%s\": \"%s\" is a file", key, up);
	}
	if (smux__bunny_key_is_dir(key))
		return 0;
	rc = smux__bunny_describe(z, ctx, key, &o, &e2);
	if (rc < 0)
		return 0;
	free(o.name);
	if (o.is_dir)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      smux__bunny_name(z),
				      "put \"%s\": is a directory", key);
	return 0;
}

/* mkdir: PUT dir/ with no body; 400 when something is there already. */
static int put_dir(struct bunnyb *z, const struct smux_ctx *ctx,
		   const char *key, struct smux_info *info,
		   struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	struct smux_source empty;
	char what[256];
	char *url = smux__bunny_url(z, key, true);
	int rc;

	if (!url)
		return smux__bunny_nomem(z, err);
	smux_source_buf(&empty, "", 0);
	req.url = url;
	req.body = &empty;
	req.what = smux__bunny_what(what, sizeof(what), "PUT", key);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	free(url);
	if (rc < 0 && resp.status == 400) {
		struct smux_error e2 = {0};
		struct smux__bunny_obj o;
		char name[SMUX_KEY_MAX + 1];
		size_t kl = strlen(key);

		/* there already: fine when a directory */
		snprintf(name, sizeof(name), "%.*s", (int)(kl - 1), key);
		if (smux__bunny_describe(z, ctx, name, &o, &e2) == 0) {
			free(o.name);
			if (!o.is_dir)
				return smux_error_set(
					err, SMUX_E_NOT_DIRECTORY,
					smux__bunny_name(z),
					"mkdir \"%s\": a file is in the way",
					key);
			smux_error_clear(err);
			rc = 0;
		} else {
			int r2 = put_in_the_way(z, ctx, key, err);

			if (r2 < 0)
				return r2;
		}
	}
	if (rc == 0 && info)
		smux__bunny_fill_dir(info, 0);
	return rc;
}

int smux__bunny_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	char hex[65], cks[80], what[256];
	const char *hdrs[3] = {"Content-Type: application/octet-stream", cks,
			       NULL};
	uint32_t type = opts ? opts->mode & S_IFMT : 0;
	char *url;
	int rc;

	smux__bunny_seen_note(z, key, NULL); /* another version from here */
	if (type && type != S_IFREG && type != S_IFDIR)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED,
				      smux__bunny_name(z),
				      "put \"%s\": Bunny Storage keeps no "
				      "symlinks or special files",
				      key);
	if (smux__bunny_key_is_dir(key)) {
		if (src->length)
			return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
					      smux__bunny_name(z),
					      "put \"%s\": a directory holds "
					      "no bytes",
					      key);
		return put_dir(z, ctx, key, info, err);
	}
	/* the Checksum is of the whole body: the caller's when it kept it
	 * while staging (smuxfs: the source is then read once, to send
	 * it), else the source is read once before it is sent (a source
	 * can always be read again) */
	if (opts && opts->sha256) {
		smux__bunny_hex(opts->sha256, 32, hex);
	} else {
		rc = hash_source(z, ctx, src, hex, err);
		if (rc < 0)
			return rc;
	}
	snprintf(cks, sizeof(cks), "Checksum: %s", hex);
	url = smux__bunny_url(z, key, false);
	if (!url)
		return smux__bunny_nomem(z, err);
	req.url = url;
	req.headers = hdrs;
	req.body = src;
	req.what = smux__bunny_what(what, sizeof(what), "PUT", key);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	if (rc < 0 && resp.status == 400) {
		/* a directory in the way, a file above the key, or the
		 * body did not match its checksum (corrupted on the way):
		 * that one is sent once more */
		struct smux_error e1 = *err;
		int r2 = put_in_the_way(z, ctx, key, err);

		if (r2 < 0) {
			free(url);
			return r2;
		}
		/* the caller's hash is checked against the bytes too: the
		 * second try sends the source's own */
		if (opts && opts->sha256) {
			r2 = hash_source(z, ctx, src, hex, err);
			if (r2 < 0) {
				free(url);
				return r2;
			}
			snprintf(cks, sizeof(cks), "Checksum: %s", hex);
		}
		*err = e1;
		rc = smux__bunny_do(z, ctx, &req, &resp, err);
		if (rc < 0 && resp.status == 400)
			rc = smux_error_wrap(err, SMUX_E_IO,
					     smux__bunny_name(z),
					     "put \"%s\": refused twice (400): "
					     "the body did not match its "
					     "SHA-256 on arrival",
					     key);
	}
	free(url);
	if (rc < 0)
		return rc;
	if (info) {
		/* the stored object's LastChanged: one DESCRIBE; the version
		 * token is the checksum sent either way */
		struct smux__bunny_obj o;
		struct smux_error e2 = {0};

		smux_info_clear(info);
		info->mode = S_IFREG | BUNNY_FILE_MODE;
		info->size = src->length;
		info->nlink = 1;
		snprintf(info->etag, sizeof(info->etag), "%s", hex);
		if (smux__bunny_describe(z, ctx, key, &o, &e2) == 0) {
			/* ours: its checksum, or (a server that gives none)
			 * its size; the token is then what head reports */
			if (!o.is_dir &&
			    (strcmp(o.checksum, hex) == 0 ||
			     (!o.checksum[0] && o.length == src->length)))
				smux__bunny_fill_obj(info, &o);
			free(o.name);
		}
	}
	return 0;
}

int smux__bunny_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux__http_req req = {.method = "DELETE"};
	struct smux__http_resp resp;
	struct smux__bunny_obj o, *kids;
	char what[256];
	size_t nk;
	char *url;
	int rc;

	if (!key[0])
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      smux__bunny_name(z),
				      "cannot delete the root");
	smux__bunny_seen_note(z, key, NULL);
	/* DELETE of a directory is recursive on Bunny, with or without its
	 * slash: look first, so a file key never takes a tree with it and a
	 * marker key only an empty directory */
	rc = smux__bunny_describe(z, ctx, key, &o, err);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	free(o.name);
	if (smux__bunny_key_is_dir(key)) {
		if (!o.is_dir)
			return 0; /* "a/" of a file names no directory */
		rc = smux__bunny_list_one(z, ctx, key, &kids, &nk, err);
		if (rc < 0)
			return rc;
		smux__bunny_objs_free(kids, nk);
		if (nk > 0)
			return smux_error_set(err, SMUX_E_NOT_EMPTY,
					      smux__bunny_name(z),
					      "delete \"%s\": not empty", key);
	} else if (o.is_dir) {
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      smux__bunny_name(z),
				      "delete \"%s\": is a directory", key);
	}
	url = smux__bunny_url(z, key, false);
	if (!url)
		return smux__bunny_nomem(z, err);
	req.url = url;
	req.what = smux__bunny_what(what, sizeof(what), "DELETE", key);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	free(url);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		return 0;
	}
	return rc;
}
