/* SPDX-License-Identifier: MIT */
/*
 * http.h - txlgen-server's HTTP side (http.c).
 */
#ifndef TXLGEN_HTTP_H
#define TXLGEN_HTTP_H

#include <netdb.h>
#include <sys/socket.h>

struct MHD_Daemon;

/* Bind and listen on the first of @p ai that takes (port 0: any free
 * one), the address bound in *@p bound; the socket, or -1 (errno). */
int http_listen(const struct addrinfo *ai, struct sockaddr_storage *bound);
/* Serve the connections of @p listen_fd (kept); NULL on failure.
 * /health answers 503 until http_set_ready(). */
struct MHD_Daemon *http_start(int listen_fd);
void http_set_ready(void);
/* The API key requests must bear (NULL: none); kept. */
void http_set_key(char *key);
/* Take no more connections (the open ones are served on). */
void http_quiesce(void);
/* Close every connection and stop @p d (NULL: only the doorman). */
void http_stop(struct MHD_Daemon *d);

#endif /* TXLGEN_HTTP_H */
