// The server's tables: each one's name, id, index segment and owner thread.
// Creating a table checks its options, makes its index (a sealed memfd that
// only this process maps writable, and never hands out), and starts its
// owner; dropping one stops the owner and gives its ids back. Used by the
// control thread only (and by restore before it starts).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/shm.hpp"
#include "core/table.hpp"
#include "server/id_pool.hpp"
#include "server/table_owner.hpp"

namespace engram {

struct TableEntry {
  uint32_t id = 0;
  std::string name;
  ShmSegment segment;  // the index: written by the owner only, never handed out
  std::unique_ptr<TableOwner> owner;
  uint32_t owner_arena_id = 0;
};

class TableRegistry {
 public:
  // Each owner takes an arena client id from `arena_ids` (its releases
  // need one of their own), and rings table id i's bell in `bells`.
  TableRegistry(ChunkArena arena, BellsHeader* bells, IdPool* arena_ids, std::string segment_prefix,
                uint32_t ring_records)
      : arena_(arena), bells_(bells), arena_ids_(arena_ids), prefix_(std::move(segment_prefix)),
        ring_records_(ring_records) {}

  // The tables that are views over shards ([[table]] shards), by name
  // with their number of shards: created as views (TableOwner::make_view).
  void set_views(std::map<std::string, uint32_t> views) { views_ = std::move(views); }
  Status create(const CheckedTableOptions& o);
  // Releases every item's chunks, closes every channel with table_dropped
  // and stops the owner. The clients' channel segments are the caller's.
  void drop(const std::string& name);
  // Stops every owner (server shutdown) and forgets the tables.
  void stop_all(ChannelClosed reason);

  TableEntry* find(const std::string& name);
  TableEntry* find(uint32_t id);
  // not_found, naming the table escaped (a request's name may hold any
  // byte) and listing those that exist.
  Status no_such_table(const std::string& name) const;

  size_t size() const noexcept { return tables_.size(); }
  // By name, in name order.
  std::map<std::string, TableEntry>& all() noexcept { return tables_; }

 private:
  ChunkArena arena_;
  BellsHeader* bells_;
  IdPool* arena_ids_;
  std::string prefix_;
  uint32_t ring_records_;
  IdPool table_ids_{0, kMaxTables};
  std::map<std::string, TableEntry> tables_;
  std::map<std::string, uint32_t> views_;
};

}  // namespace engram
