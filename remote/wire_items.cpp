#include "remote/wire_items.hpp"

namespace engram::remote {

Status add_wire_slices(const engram_private_item& it, const LocalTable& t, std::unordered_set<uint64_t>* sent,
                       WireChunks* chunks, WireSlices* slices, uint64_t* bytes) {
  for (uint32_t k = 0; k < it.num_slices; ++k) {
    const engram_private_slice& sl = it.slices[k];
    if (!sent->count(sl.chunk)) {
      engram::peer::v1::Chunk* c = chunks->Add();
      c->set_id(sl.chunk);
      if (Status s = copy_sealed_chunk(sl.block, sl.block_size, t.cols, t.ncols, t.signature, c->mutable_data());
          !s.ok()) {
        chunks->RemoveLast();
        return s;
      }
      sent->insert(sl.chunk);
      *bytes += c->data().size();
    }
    engram::peer::v1::Slice* s = slices->Add();
    s->set_chunk(sl.chunk);
    s->set_offset(sl.offset);
    s->set_length(sl.length);
  }
  return Status::Ok();
}

Status add_wire_item(const engram_private_item& it, const LocalTable& t, std::unordered_set<uint64_t>* sent,
                     WireChunks* chunks, WireItems* items, uint64_t* bytes) {
  engram::peer::v1::Item* item = items->Add();
  item->set_sequence(it.sequence + 1);
  item->set_priority(it.priority);
  Status s = add_wire_slices(it, t, sent, chunks, item->mutable_slices(), bytes);
  if (!s.ok()) items->RemoveLast();
  return s;
}

}  // namespace engram::remote
