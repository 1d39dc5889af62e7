#include "core/item_listing.hpp"

#include <algorithm>
#include <cstring>

#include "core/control_message.hpp"

namespace engram {

uint32_t Table::list(uint32_t from, uint32_t max_items, uint32_t max_scan, std::vector<ListedItem>* out) const {
  const uint32_t end = h_->capacity;
  uint32_t slot = std::min(from, end);
  uint32_t found = 0;
  for (uint32_t looked = 0; slot < end && looked < max_scan && found < max_items; ++slot, ++looked) {
    const ItemSlot& it = items_[slot];
    if (it.key == 0) continue;
    uint32_t steps = 0;
    const ChunkRef* r = refs(slot);
    for (uint32_t k = 0; k < it.num_refs; ++k) steps += r[k].length;
    out->push_back({it.key, it.priority, it.inserted_seq, it.times_sampled, steps});
    ++found;
  }
  return slot;
}

void sort_items(std::vector<ListedItem>* items, ItemOrder order) {
  auto older = [](const ListedItem& a, const ListedItem& b) { return a.inserted_seq < b.inserted_seq; };
  if (order == ItemOrder::insertion) {
    std::sort(items->begin(), items->end(), older);
    return;
  }
  std::sort(items->begin(), items->end(), [&](const ListedItem& a, const ListedItem& b) {
    return a.priority != b.priority ? a.priority > b.priority : older(a, b);
  });
}

Status collect_items(const ListCall& call, const std::string& name, ItemOrder order, std::vector<ListedItem>* out,
                     const std::function<void(size_t, uint32_t, uint32_t)>& progress) {
  ItemsRequest rq{};
  if (Status s = copy_fixed(rq.name, sizeof rq.name, name, "table name"); !s.ok()) return s;
  rq.max_items = kMaxListedItems;
  out->clear();
  std::vector<char> reply;
  for (;;) {
    if (Status s = call(rq, &reply); !s.ok()) return s;
    ItemsReply h;
    if (reply.size() < sizeof h) return {Errc::corrupt, "a list_items reply shorter than its header"};
    std::memcpy(&h, reply.data(), sizeof h);
    // The server's word, checked: progress, room for what it says, and
    // no more than asked, so that a broken reply cannot loop or overrun.
    if (h.count > rq.max_items || reply.size() != sizeof h + size_t{h.count} * sizeof(ListedItem) ||
        (h.next_slot <= rq.from_slot && h.next_slot != h.capacity) || h.next_slot > h.capacity)
      return {Errc::corrupt, "a list_items reply that does not add up (items " + std::to_string(h.count) +
                                 ", slots " + std::to_string(rq.from_slot) + " to " + std::to_string(h.next_slot) +
                                 " of " + std::to_string(h.capacity) + ")"};
    size_t had = out->size();
    out->resize(had + h.count);
    std::memcpy(out->data() + had, reply.data() + sizeof h, size_t{h.count} * sizeof(ListedItem));
    if (progress) progress(out->size(), h.next_slot, h.capacity);
    if (h.next_slot == h.capacity) break;
    rq.from_slot = h.next_slot;
  }
  sort_items(out, order);
  return Status::Ok();
}

}  // namespace engram
