/* The TLS link's own limit, for bench/remote.sh: one mutual-TLS stream of
 * 1 MiB writes between the same namespaces, with the certificates the
 * engramds use and the library and defaults gRPC uses on this system
 * (Debian's gRPC links the system OpenSSL; both negotiate TLS 1.3 and its
 * default first suite, TLS_AES_256_GCM_SHA384). engram's TLS link is
 * measured against this, as its plaintext link is against plain TCP.
 * Prints one JSON line: bytes, seconds, cpu_s (getrusage), the protocol
 * and cipher negotiated.
 *
 *   tls_stream recv PORT CERT KEY CA
 *   tls_stream send HOST PORT BYTES CERT KEY CA
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"

enum { BUF = 1 << 20 };

static int fail(const char* what) {
  fprintf(stderr, "tls_stream: %s: ", what);
  ERR_print_errors_fp(stderr);
  fputc('\n', stderr);
  return 1;
}

/* Mutual TLS as the engramds have it: each side shows its certificate and
 * checks the other's against the CA. */
static SSL_CTX* context(int server, const char* cert, const char* key, const char* ca) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
    return NULL;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_num_tickets(ctx, 0); /* nothing for the sender to leave unread */
  return ctx;
}

static void report(SSL* ssl, int64_t bytes, int64_t t0) {
  printf("{\"bytes\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f, \"protocol\": \"%s\", \"cipher\": \"%s\"}\n",
         (long long)bytes, (now_ns() - t0) * 1e-9, cpu_s(), SSL_get_version(ssl), SSL_get_cipher_name(ssl));
}

static int recv_stream(int port, const char* cert, const char* key, const char* ca) {
  SSL_CTX* ctx = context(1, cert, key, ca);
  if (!ctx) return fail("certificates");
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1)) return perror("tls_stream: listen"), 1;
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, accept(l, NULL, NULL));
  if (SSL_accept(ssl) != 1) return fail("handshake");
  static char buf[BUF];
  int64_t bytes = 0, t0 = 0;
  for (;;) {
    int n = SSL_read(ssl, buf, BUF);
    if (n <= 0) break;
    if (!bytes) t0 = now_ns();
    bytes += n;
  }
  report(ssl, bytes, t0);
  return 0;
}

static int send_stream(const char* host, int port, int64_t bytes, const char* cert, const char* key, const char* ca) {
  SSL_CTX* ctx = context(0, cert, key, ca);
  if (!ctx) return fail("certificates");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  for (int tries = 0; connect(fd, (struct sockaddr*)&a, sizeof a) != 0; ++tries) {
    if (tries > 100) return perror("tls_stream: connect"), 1;
    usleep(20000);
  }
  SSL* ssl = SSL_new(ctx);
  /* Records go out in writes of 1 MiB, as gRPC's TLS sends its frames
   * (encrypted into its own buffers, then written in large writes), not
   * one write() per 16 KB record. */
  BIO* sock = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* buffered = BIO_new(BIO_f_buffer());
  BIO_set_write_buffer_size(buffered, BUF);
  BIO_push(buffered, sock);
  BIO_up_ref(sock);
  SSL_set_bio(ssl, sock, buffered);
  SSL_set1_host(ssl, host);
  if (SSL_connect(ssl) != 1) return fail("handshake");
  static char buf[BUF];
  memset(buf, 0x5a, BUF);
  int64_t t0 = now_ns();
  for (int64_t sent = 0; sent < bytes;) {
    int n = SSL_write(ssl, buf, (int)(bytes - sent < BUF ? bytes - sent : BUF));
    if (n <= 0) return fail("write");
    sent += n;
  }
  SSL_shutdown(ssl);
  (void)BIO_flush(SSL_get_wbio(ssl));
  report(ssl, bytes, t0);
  /* Closing with bytes unread would reset the connection and lose what
   * the receiver has not read yet: half-close, and wait for its close. */
  shutdown(fd, SHUT_WR);
  while (read(fd, buf, BUF) > 0) {
  }
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  const char* cmd = argc > 1 ? argv[1] : "";
  if (!strcmp(cmd, "recv") && argc == 6) return recv_stream(atoi(argv[2]), argv[3], argv[4], argv[5]);
  if (!strcmp(cmd, "send") && argc == 8)
    return send_stream(argv[2], atoi(argv[3]), atoll(argv[4]), argv[5], argv[6], argv[7]);
  fprintf(stderr, "usage: see the comment at the top of bench/tls_stream.c\n");
  return 2;
}
