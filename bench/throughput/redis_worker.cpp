#include "redis_worker.hpp"

#include <hiredis/hiredis.h>

#include <cstdio>
#include <random>

namespace throughput {

Result redis_worker(bool sample, uint64_t payload, uint64_t key_base, uint64_t keys, const std::function<void()>& ready,
                    bool fill) {
  redisContext* rc = redisConnectUnix(g_opt.redis_socket.c_str());
  if (!rc || rc->err) return failed("redis connect", -1);
  Bytes data = random_bytes(payload, key_base + 1);
  std::mt19937_64 rng(key_base + 7);
  uint64_t next = 0;
  int err = 0;
  auto batch = [&]() -> double {
    char key[32];
    for (int i = 0; i < kPipeline; ++i) {
      uint64_t k = sample ? rng() % keys : key_base + (next++ % keys);
      int n = std::snprintf(key, sizeof key, "k%llu", static_cast<unsigned long long>(k));
      if (sample) redisAppendCommand(rc, "GET %b", key, size_t(n));
      else redisAppendCommand(rc, "SET %b %b", key, size_t(n), data.data(), size_t(payload));
    }
    for (int i = 0; i < kPipeline; ++i) {
      void* reply = nullptr;
      if (redisGetReply(rc, &reply) != REDIS_OK) err = 1;
      else {
        auto* r = static_cast<redisReply*>(reply);
        if (sample && (r->type != REDIS_REPLY_STRING || r->len != payload)) err = 2;
        freeReplyObject(reply);
      }
    }
    return kPipeline;
  };
  ready();
  Result r;
  if (fill) {
    while (next < keys) batch();
  } else {
    r = timed(batch);
  }
  redisFree(rc);
  if (err) {
    Result f;
    f.error = -1;
    std::snprintf(f.message, sizeof f.message, "redis %s failed (%d)", sample ? "GET" : "SET", err);
    return f;
  }
  return r;
}

}  // namespace throughput
