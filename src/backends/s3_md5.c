// SPDX-License-Identifier: MIT
/*
 * s3_md5.c - the MD5 of a request body, as S3 checks it and answers it:
 * the Content-MD5 header a PUT of an object or part carries (the server
 * refuses a body that arrived otherwise: cut short by a proxy or a
 * connection closed early), and the ETag the answer gives, which for a
 * plain PUT or a part is that MD5 in hex (a server that acknowledged a
 * body it did not take whole is caught here even when it checked
 * nothing). Multipart objects' ETags (not 32 hex digits) and those of an
 * answer saying SSE-KMS or SSE-C (s3.c call_on_header) are no MD5 and are
 * not compared.
 *
 * Owns nothing; reads the body through its smux_source.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "backends/s3_internal.h"

#define MD5_CHUNK ((size_t)256 * 1024)

int smux__s3_md5(struct s3b *s, const struct smux_source *body,
		 unsigned char md5[16], char b64[25], bool *have,
		 struct smux_error *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char *buf = malloc(MD5_CHUNK);
	unsigned mdlen = 0;
	uint64_t off = 0;
	long got = 0;

	*have = false;
	if (!md || !buf) {
		EVP_MD_CTX_free(md);
		free(buf);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	}
	if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1) {
		/* no MD5 here (FIPS): the put goes without one */
		EVP_MD_CTX_free(md);
		free(buf);
		return 0;
	}
	while (off < body->length) {
		size_t want = body->length - off < MD5_CHUNK
				      ? (size_t)(body->length - off)
				      : MD5_CHUNK;

		got = smux_source_read(body, off, buf, want);
		if (got <= 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)got);
		off += (uint64_t)got;
	}
	free(buf);
	if (off < body->length) {
		EVP_MD_CTX_free(md);
		/* the caller's own staged bytes: a local failure */
		return smux_error_make_local(err, got < 0 ? (int)-got : EIO);
	}
	if (EVP_DigestFinal_ex(md, md5, &mdlen) != 1 || mdlen != 16) {
		EVP_MD_CTX_free(md);
		return 0; /* no MD5 after all: the put goes without */
	}
	EVP_MD_CTX_free(md);
	EVP_EncodeBlock((unsigned char *)b64, md5, 16);
	*have = true;
	return 0;
}

int smux__s3_md5_etag(struct s3b *s, const char *what, const char *etag,
		      const unsigned char md5[16], struct smux_error *err)
{
	char hex[33];

	if (strlen(etag) != 32)
		return 0; /* no MD5: a multipart or encrypted object's */
	for (int i = 0; i < 32; i++)
		if (!isxdigit((unsigned char)etag[i]))
			return 0;
	for (size_t i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", md5[i]);
	if (strcasecmp(hex, etag) == 0)
		return 0;
	return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
			      "%s: the server stored another body (ETag %s, "
			      "the MD5 sent %s)",
			      what, etag, hex);
}
