# SPDX-License-Identifier: MIT
"""Ranged GET answers with the faults a client must refuse, shared by the
scripted servers (http_script.py, s3_hostile.py).

answer(handler, mode, data, etag): answers the request handler's GET (or
HEAD) of @data, honouring its Range header with a 206 that is, by mode:
  good      what was asked
  other     its Content-Range and body start at 0, whatever was asked
  capped    honest, but at most 16 bytes
  eofclose  honest headers, no Content-Length, half the body, then the
            connection closes (a GET without Range: a 200 so cut)
handler.reply(status, body, headers) sends a whole answer.
"""


def answer(handler, mode, data, etag):
    n = len(data)
    rng = handler.headers.get("Range", "")
    first, last = 0, n - 1
    if rng.startswith("bytes="):
        a, _, b = rng[6:].partition("-")
        first = int(a)
        last = min(int(b), n - 1) if b else n - 1
    if mode == "other":
        last, first = last - first, 0
    elif mode == "capped":
        last = min(last, first + 15)
    body = data[first:last + 1]
    status = 206 if rng else 200
    hdrs = [("ETag", etag)]
    if rng:
        hdrs.append(("Content-Range", "bytes %d-%d/%d" % (first, last, n)))
    if mode != "eofclose":
        handler.reply(status, body, hdrs)
        return
    handler.send_response(status)
    for k, v in hdrs:
        handler.send_header(k, v)
    handler.send_header("Connection", "close")
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body[:len(body) // 2])
    handler.wfile.flush()
    handler.close_connection = True
