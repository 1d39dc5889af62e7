// Listing a table's items (engram_items_open, engramctl items): the
// client asks the server for the items piece by piece (ControlType::
// list_items), each piece the items of a run of slots, and sorts what it
// collected into the order asked for.
//
// Why by slot and sorted by the client: a slot holds one item at a time
// and items never move, so a listing that visits each slot once shows
// every item present from its start to its end exactly once, none twice
// and none that was not there, while writers insert and evict; and each
// piece takes the table's owner for a bounded time (kMaxListScan slots),
// so a listing never stops writers or samplers for longer than that. An
// item inserted during the listing appears if its slot had not been
// visited yet; one removed meanwhile may appear (as it was) or not. An
// order kept by the server instead (a cursor in insertion or priority
// order) would have to survive the cursor's item leaving and priorities
// changing under it, or hold the owner for a whole pass. The price: the
// client holds the whole listing (32 bytes an item) before its first
// page, and each item's fields are as of its piece.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/control_message.hpp"
#include "core/status.hpp"
#include "core/table.hpp"

namespace engram {

enum class ItemOrder : int32_t {
  insertion = 0,  // oldest first
  priority = 1,   // highest first; ties oldest first
};

// One list_items request and its reply (the caller's control_call, or a
// client's, which keeps its own bookkeeping of the socket).
using ListCall = std::function<Status(const ItemsRequest& rq, std::vector<char>* reply)>;

// Collects every item of table `name` through `call`, piece by piece,
// into *out in `order`. `progress(listed, slots_done, capacity)`, if
// given, is called after each piece. Errors: the server's (Errc::not_found
// for no such table), Errc::corrupt for a reply that does not add up.
Status collect_items(const ListCall& call, const std::string& name, ItemOrder order, std::vector<ListedItem>* out,
                     const std::function<void(size_t, uint32_t, uint32_t)>& progress = {});

// Sorts items into `order` (the one home of both orders).
void sort_items(std::vector<ListedItem>* items, ItemOrder order);

}  // namespace engram
