/* SPDX-License-Identifier: MIT */
/*
 * stagehash.c - the SHA-256 of a staging file, kept while it is written
 * from its start (cp, tar, a download: every write lands at the end of
 * what is hashed). Bunny Storage wants the content's SHA-256 before the
 * PUT (its Checksum header); with this the upload reads the staging file
 * once, to send it, instead of once more to hash it (issue 12). A write
 * anywhere else, a truncation to another size or content that did not
 * come through here (a staged rewrite's GET) loses the hash: the backend
 * then hashes what it sends itself.
 *
 * Owner: the daemon's open files (ofile.c); one per staging file, used
 * under its ofile's lock.
 */
#include <openssl/evp.h>
#include <string.h>

#include "fs/fs.h"

void smuxfs_stagehash_start(struct smuxfs_stagehash *h)
{
	if (!h->mc)
		h->mc = EVP_MD_CTX_new();
	h->ok = h->mc && EVP_DigestInit_ex(h->mc, EVP_sha256(), NULL) == 1;
	h->len = 0;
}

void smuxfs_stagehash_write(struct smuxfs_stagehash *h, uint64_t off,
			    const void *buf, size_t len)
{
	if (!h->ok)
		return;
	if (off != h->len || EVP_DigestUpdate(h->mc, buf, len) != 1) {
		h->ok = false;
		return;
	}
	h->len += len;
}

void smuxfs_stagehash_truncate(struct smuxfs_stagehash *h, uint64_t size)
{
	if (!h->mc)
		return;
	if (size == 0)
		smuxfs_stagehash_start(h); /* empty again: hashed from 0 */
	else if (size != h->len)
		h->ok = false;
}

void smuxfs_stagehash_lost(struct smuxfs_stagehash *h)
{
	h->ok = false;
}

bool smuxfs_stagehash_get(const struct smuxfs_stagehash *h, uint64_t size,
			  unsigned char out[32])
{
	EVP_MD_CTX *c;
	unsigned int n = 0;
	bool ok;

	if (!h->ok || h->len != size)
		return false;
	/* a copy: later appends go on from this state */
	c = EVP_MD_CTX_new();
	ok = c && EVP_MD_CTX_copy_ex(c, h->mc) == 1 &&
	     EVP_DigestFinal_ex(c, out, &n) == 1 && n == 32;
	EVP_MD_CTX_free(c);
	return ok;
}

void smuxfs_stagehash_free(struct smuxfs_stagehash *h)
{
	EVP_MD_CTX_free(h->mc);
	h->mc = NULL;
	h->ok = false;
}
