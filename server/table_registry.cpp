#include "server/table_registry.hpp"

#include "server/config.hpp"

#include "core/control_message.hpp"
#include "core/name.hpp"
#include "server/log.hpp"

namespace engram {

Status TableRegistry::create(const CheckedTableOptions& checked) {
  const TableOptions& o = *checked;
  if (tables_.count(o.name)) return {Errc::already_exists, "a table named \"" + escaped(o.name) + "\" exists"};
  ArenaPlan now;  // the arena as it is, and as far as each class can still grow
  for (uint32_t k = 0; k < arena_.num_classes(); ++k) {
    now.start.classes.push_back({arena_.size_class(k).block_size, arena_.committed(k)});
    now.layout.classes.push_back({arena_.size_class(k).block_size, arena_.most_blocks(k)});
  }
  auto fit = arena_fit(now, o);
  if (!fit.ok()) return fit.status();
  if (!fit->empty()) log_warn(*fit);
  auto id = table_ids_.take("table");
  if (!id.ok()) return {Errc::full, "at most " + std::to_string(kMaxTables) + " tables"};
  auto aid = arena_ids_->take("arena client");
  if (!aid.ok()) {
    table_ids_.give(*id);
    return aid.status();
  }
  auto undo = [&] {
    table_ids_.give(*id);
    arena_ids_->give(*aid);
  };
  TableEntry e;
  e.id = *id;
  e.name = o.name;
  e.owner_arena_id = *aid;
  auto seg = ShmSegment::create_sealed(prefix_ + ".index" + std::to_string(*id), Table::bytes_needed(checked),
                                       ShmSegment::Sealing::writable_here_only);
  if (!seg.ok()) {
    undo();
    return seg.status();
  }
  e.segment = std::move(*seg);
  e.segment.close_fd();  // handed to nobody: the mapping is all the daemon needs
  auto t = Table::format(e.segment.data(), e.segment.size(), checked, 0x5eed0000ULL + *id);
  if (!t.ok()) {
    undo();
    return t.status();
  }
  e.owner = std::make_unique<TableOwner>(arena_, *aid, *t, &bells_->slots[*id].bell, ring_records_);
  auto view = views_.find(o.name);
  if (view != views_.end()) e.owner->make_view(view->second, kShardRoutes, 0x5eed0000ULL + *id);
  e.owner->start();
  if (view != views_.end())
    log_info("table " + o.name + ": created as a view over " + std::to_string(view->second) + " shards (max_size " +
             std::to_string(o.capacity) + " draws)");
  else
    log_info("table " + o.name + ": created (max_size " + std::to_string(o.capacity) + ", sampler " +
             selector_kind_name(o.sampler.kind) + ", remover " + selector_kind_name(o.remover.kind) + ")");
  tables_.emplace(o.name, std::move(e));
  return Status::Ok();
}

void TableRegistry::drop(const std::string& name) {
  auto it = tables_.find(name);
  if (it == tables_.end()) return;
  TableEntry& e = it->second;
  e.owner->reset();  // releases every item's chunks
  e.owner->stop(ChannelClosed::table_dropped);
  table_ids_.give(e.id);
  arena_ids_->give(e.owner_arena_id);
  log_info("table " + name + ": dropped");
  tables_.erase(it);
}

void TableRegistry::stop_all(ChannelClosed reason) {
  for (auto& [n, e] : tables_) e.owner->stop(reason);
  tables_.clear();
}

TableEntry* TableRegistry::find(const std::string& name) {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : &it->second;
}

TableEntry* TableRegistry::find(uint32_t id) {
  for (auto& [n, e] : tables_)
    if (e.id == id) return &e;
  return nullptr;
}

Status TableRegistry::no_such_table(const std::string& name) const {
  std::string list = " (there are no tables)";
  if (!tables_.empty()) {
    list = " (tables:";
    for (auto& [n, e] : tables_) list += " " + n;
    list += ")";
  }
  return {Errc::not_found, "no table named \"" + escaped(name) + "\"" + list};
}

}  // namespace engram
