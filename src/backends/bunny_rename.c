// SPDX-License-Identifier: MIT
/*
 * bunny_rename.c - the bunny backend's rename. Bunny Storage has no
 * server-side copy or move, so a rename uploads the content under the new
 * name and deletes the old one (not atomic: a reader may see both names
 * for a moment, as with the dispatch's fallback).
 *
 * The content comes from the caller's local copy when the call's context
 * offers one for @src (ctx->local: the daemon's staging file or read
 * cache) and it is the stored version: its size is DESCRIBE's Length and
 * its SHA-256 DESCRIBE's Checksum. Otherwise (no copy, a stale one, or a
 * stored object without a Checksum) the object is read first, a GET into
 * an unnamed temporary file, as the dispatch's copy fallback does.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "backends/bunny_internal.h"
#include "smux/bunny.h"
#include "smux/ctx.h"

/* Whether @size bytes of @fd hash to the uppercase SHA-256 @want. A read
 * error or a short file is a mismatch (the object is read instead). */
static bool local_matches(struct bunnyb *z, const struct smux_ctx *ctx, int fd,
			  uint64_t size, const char *want)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *mc = EVP_MD_CTX_new();
	unsigned char *buf = malloc(SMUX_IO_CHUNK);
	struct smux_error e2 = {0};
	char hex[65];
	uint64_t pos = 0;
	bool same = false;

	if (!mc || !buf || !EVP_DigestInit_ex(mc, EVP_sha256(), NULL))
		goto out;
	while (pos < size) {
		uint64_t left = size - pos;
		ssize_t n;

		if (smux_ctx_check(ctx, smux__bunny_name(z), &e2) < 0)
			goto out;
		n = pread(fd, buf,
			  left < SMUX_IO_CHUNK ? (size_t)left : SMUX_IO_CHUNK,
			  (off_t)pos);
		if (n <= 0)
			goto out;
		EVP_DigestUpdate(mc, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	EVP_DigestFinal_ex(mc, md, &mdlen);
	smux__bunny_hex(md, mdlen, hex);
	same = strcasecmp(hex, want) == 0;
out:
	EVP_MD_CTX_free(mc);
	free(buf);
	return same;
}

/* The local copy of @src when it holds the stored version, else -1; its
 * info (for the put's options) in @info. */
static int local_source(struct bunnyb *z, const struct smux_ctx *ctx,
			const char *src, struct smux_info *info,
			struct smux_error *err)
{
	struct smux__bunny_obj o;
	uint64_t size = 0;
	int fd = smux_local_copy_fd(ctx->local, src, &size);
	int rc;

	if (fd < 0)
		return -1;
	rc = smux__bunny_describe(z, ctx, src, &o, err);
	if (rc < 0)
		return rc; /* absent or failing: the get would say the same */
	free(o.name);
	if (o.is_dir)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      smux__bunny_name(z),
				      "rename \"%s\": is a directory", src);
	if (!o.checksum[0] || o.length != size ||
	    !local_matches(z, ctx, fd, size, o.checksum))
		return -1;
	smux__bunny_fill_obj(info, &o);
	return fd;
}

int smux__bunny_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst, struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux_put_opts opts;
	struct smux_source source;
	struct smux_info info;
	struct smux_sink sink;
	int fd, tmp = -1, rc;

	if (smux__bunny_key_is_dir(src) || smux__bunny_key_is_dir(dst))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      smux__bunny_name(z),
				      "rename: object keys only");
	smux_info_clear(&info);
	fd = local_source(z, ctx, src, &info, err);
	if (fd < -1)
		return fd;
	if (fd >= 0) {
		atomic_fetch_add(&z->n_local_renames, 1);
		smux_source_fd(&source, fd, 0, info.size);
	} else {
		tmp = smux_tmpfile(smux__bunny_name(z), "rename", err);
		if (tmp < 0)
			return tmp;
		smux_sink_fd(&sink, tmp, 0);
		rc = smux__bunny_get(
			b, ctx, src,
			&(struct smux_get_opts){.length = SMUX_LEN_ALL}, &sink,
			&info, err);
		if (rc < 0) {
			/* a full or failing TMPDIR is ours, not Bunny's */
			if (sink.error)
				rc = smux_error_make_local(err, sink.error);
			goto out;
		}
		smux_source_fd(&source, tmp, 0, sink.written);
	}
	smux_put_opts_keep(&opts, &info);
	rc = smux__bunny_put(b, ctx, dst, &source, &opts, NULL, err);
	if (rc == 0)
		rc = smux__bunny_del(b, ctx, src, err);
out:
	if (tmp >= 0)
		close(tmp);
	return rc;
}

unsigned long smux_bunny_local_renames(struct smux_backend *b)
{
	struct bunnyb *z = smux__bunny_from(b);

	return z ? atomic_load(&z->n_local_renames) : 0;
}
