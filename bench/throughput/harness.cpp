#include "harness.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

namespace throughput {

Options g_opt;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Result failed(const char* what, int rc) {
  Result r;
  r.error = rc ? rc : -1;
  std::snprintf(r.message, sizeof r.message, "%s: %s (%s)", what, engram_strerror(rc), engram_last_error());
  return r;
}
Result failed(const char* what, const engram::api::Error& e) {
  Result r;
  r.error = e.code() ? e.code() : -1;
  std::snprintf(r.message, sizeof r.message, "%s: %s", what, e.what());
  return r;
}

std::vector<Result> run_workers(int n, const std::function<Result(int, const std::function<void()>&)>& body) {
  int ready_pipe[2], go_pipe[2];
  if (::pipe(ready_pipe) || ::pipe(go_pipe)) std::abort();
  std::vector<pid_t> pids;
  std::vector<int> result_fds;
  for (int i = 0; i < n; ++i) {
    int res[2];
    if (::pipe(res)) std::abort();
    pid_t p = ::fork();
    if (p == 0) {
      ::close(res[0]);
      bool said_ready = false;
      auto ready = [&] {
        said_ready = true;
        char c = 1;
        if (::write(ready_pipe[1], &c, 1) != 1) std::_Exit(3);
        if (::read(go_pipe[0], &c, 1) != 1) std::_Exit(3);
      };
      Result r = body(i, ready);
      // A worker that failed before it was ready (the server went away)
      // still counts as ready, or the parent would wait for it for ever.
      char c = 1;
      if (!said_ready && ::write(ready_pipe[1], &c, 1) != 1) std::_Exit(3);
      if (::write(res[1], &r, sizeof r) != sizeof r) std::_Exit(3);
      std::_Exit(0);
    }
    ::close(res[1]);
    pids.push_back(p);
    result_fds.push_back(res[0]);
  }
  for (int i = 0; i < n; ++i) {
    char c;
    if (::read(ready_pipe[0], &c, 1) != 1) break;
  }
  std::string go(static_cast<size_t>(n), '\1');
  if (::write(go_pipe[1], go.data(), go.size()) != static_cast<ssize_t>(go.size())) std::abort();
  std::vector<Result> out;
  for (int i = 0; i < n; ++i) {
    Result r;
    if (::read(result_fds[static_cast<size_t>(i)], &r, sizeof r) != sizeof r) {
      r.error = -1;
      std::snprintf(r.message, sizeof r.message, "worker %d died", i);
    }
    ::close(result_fds[static_cast<size_t>(i)]);
    out.push_back(r);
  }
  for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  for (int fd : {ready_pipe[0], ready_pipe[1], go_pipe[0], go_pipe[1]}) ::close(fd);
  return out;
}

Bytes random_bytes(size_t n, uint64_t seed) {
  Bytes v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

}  // namespace throughput
