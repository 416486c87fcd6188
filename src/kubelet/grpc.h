/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpc.h - gRPC over HTTP/2 over unix sockets, on a libev loop: the server kubelet calls
 * (a device plugin) and the one client call a plugin makes (Register on kubelet.sock).
 *
 * Implemented in three files, as curl splits its protocol code: grpcconn.c the connection (the
 * HTTP/2 session, nghttp2's, and the only file that includes <nghttp2/nghttp2.h>; socket I/O,
 * streams, framing; private API in grpcconn.h), grpcserver.c the server and its calls,
 * grpcclient.c the unary client. Messages are opaque bytes here (the caller encodes and decodes
 * them: kubelet/dpapi.h). gRPC framing: each message is a 5-byte prefix (compressed flag 0, 4-byte
 * big-endian length) and the bytes; a message may span DATA frames and a DATA frame may hold
 * several messages. Responses are HEADERS (:status 200, content-type application/grpc), DATA, and
 * trailers (grpc-status, grpc-message percent-encoded); an error before any message is a
 * trailers-only HEADERS frame.
 *
 * Bounded: a message over GRPC_MAX_MESSAGE, more than GRPC_MAX_STREAMS concurrent streams on
 * a connection, or more than GRPC_MAX_CONNS connections are refused (RESOURCE_EXHAUSTED, a
 * stream reset or a closed connection), and nothing a peer sends (garbage, a truncated frame, a
 * reset) harms another stream, another connection or the process. No threads; never blocks
 * the loop (non-blocking sockets, writes queued and flushed when writable). Does not log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct ev_loop;

#define GRPC_MAX_MESSAGE (4u << 20) /* bytes of one message, as gRPC's default */
#define GRPC_MAX_STREAMS 64         /* concurrent streams per connection */
#define GRPC_MAX_CONNS   16         /* connections per server */

/* gRPC status codes used here. */
enum grpc_status {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
};

struct grpc_server;
struct grpc_call;

/* A method's handler: the request message (complete, without its 5-byte prefix) of a new call;
 * `msg` is valid during this call only. A unary method answers with grpc_call_reply() then
 * grpc_call_finish(GRPC_OK), or with grpc_call_finish(error) alone, now or later (the call
 * stays valid until finished or cancelled: a handler that keeps the call past its return must
 * set grpc_call_on_cancel() to learn when it goes); a server-streaming method sends any number
 * of grpc_call_reply() and finishes when it wants the stream to end. */
typedef void (*grpc_handler)(struct grpc_call *call, const uint8_t *msg, size_t len,
                             void *userdata);

struct grpc_method {
    const char *path; /* "/v1beta1.DevicePlugin/Allocate" */
    bool server_stream;
    grpc_handler handler;
    void *userdata;
};

/* Creates the socket at `path` (an existing socket file there is replaced; mode 0600; a path
 * longer than sun_path holds is -ENAMETOOLONG with a message), listens and serves `methods`
 * (copied; an unknown path gets UNIMPLEMENTED). Returns 0 and `*ret`, or -errno with ret_err. */
int grpc_server_new(struct ev_loop *loop, const char *path, const struct grpc_method *methods,
                    size_t n_methods, struct grpc_server **ret, struct err *ret_err);
/* Stops: cancels every call (their cancel callbacks run), closes connections (a GOAWAY is
 * tried first), unlinks the socket if it is still ours (same inode). Accepts NULL; returns NULL.
 * Not from inside a handler or a cancel callback. */
struct grpc_server *grpc_server_free(struct grpc_server *s);
/* Calls in progress (open streams with a handler call not finished). */
size_t grpc_server_calls(const struct grpc_server *s);

/* Sends one response message on `call` (the HEADERS first if not sent yet). Returns 0, or -EPIPE
 * when the call is finished or its connection is going, -E2BIG over GRPC_MAX_MESSAGE, -ENOBUFS
 * when more than 2 * GRPC_MAX_MESSAGE bytes of this call wait unsent (a peer that does not
 * read), -ENOMEM. */
int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len);
/* Ends the call with trailers: `status` and, when not OK, `message`. The call is freed after
 * this (do not use it again). */
void grpc_call_finish(struct grpc_call *call, enum grpc_status status, const char *message);
/* Called (once) when the peer resets the stream or the connection goes before the call is
 * finished; the call is freed after the callback returns (finishing it there does nothing). */
void grpc_call_on_cancel(struct grpc_call *call, void (*cb)(struct grpc_call *call, void *ud),
                         void *ud);

/* A unary client call on the unix socket `path`: connects (non-blocking), sends `msg` to method
 * `method` and calls `done` once with the status, the message (NULL when OK) and the response
 * message (NULL unless OK; both borrowed for the callback). `timeout` seconds bound the whole
 * call (DEADLINE_EXCEEDED; sent as grpc-timeout too). A connection of its own per call, closed
 * after. A socket that is missing or refuses is UNAVAILABLE through `done`. Returns 0 (done will
 * be called, never from inside this function) or -errno (done is not called): -ENAMETOOLONG
 * (path over sun_path), -E2BIG (msg over GRPC_MAX_MESSAGE), -ENOMEM, socket()'s errors. */
typedef void (*grpc_done)(enum grpc_status status, const char *message, const uint8_t *resp,
                          size_t len, void *userdata);
int grpc_unary(struct ev_loop *loop, const char *path, const char *method, const uint8_t *msg,
               size_t len, double timeout, grpc_done done, void *userdata);
