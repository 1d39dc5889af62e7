// Listing a table's items (engram_items_*): collected whole from the
// server by core/item_listing (which says why the client sorts), then
// handed out in the caller's pages. A listing holds nothing of the
// server's, so it outlives its client.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "capi/client.hpp"
#include "core/item_listing.hpp"

using namespace engram;

struct engram_items {
  std::vector<ListedItem> items;
  size_t next = 0;
};

extern "C" {

int engram_items_open(engram_client* c, const char* name, int32_t order, engram_items** out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !out) return fail(Errc::invalid_argument, "client or out is NULL");
  *out = nullptr;
  if (order != ENGRAM_BY_INSERTION && order != ENGRAM_BY_PRIORITY)
    return fail(Errc::invalid_argument, "order " + std::to_string(order) +
                                            " is unknown; use ENGRAM_BY_INSERTION or ENGRAM_BY_PRIORITY");
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  auto it = std::make_unique<engram_items>();
  ListCall call = [c](const ItemsRequest& rq, std::vector<char>* reply) {
    return c->control(ControlType::list_items, &rq, sizeof rq, reply);
  };
  if (Status s = collect_items(call, n.name, static_cast<ItemOrder>(order), &it->items); !s.ok()) return set_error(s);
  *out = it.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

uint64_t engram_items_count(const engram_items* it) { return it ? it->items.size() : 0; }

int engram_items_next(engram_items* it, engram_item* out, uint32_t cap, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!it || !count) return fail(Errc::invalid_argument, "listing or count is NULL");
  if (!out && cap > 0) return fail(Errc::invalid_argument, "out is NULL and cap is " + std::to_string(cap));
  size_t n = std::min<size_t>(cap, it->items.size() - it->next);
  for (size_t i = 0; i < n; ++i) {
    const ListedItem& l = it->items[it->next + i];
    out[i] = {l.key, l.priority, l.inserted_seq, l.times_sampled, l.num_steps};
  }
  it->next += n;
  *count = static_cast<uint32_t>(n);
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_items_close(engram_items* it) { delete it; }

}  // extern "C"
