// A client of this server with one of its tables open, and for the streams
// that insert a relay into it: how every peer stream and link reaches the
// server's tables. Through the C API, as any client does, so that nothing
// in remote/ touches an index; the same limits and checks apply to a peer
// as to a local writer.
#pragma once

#include <cstdint>
#include <string>

#include "capi/relay.h"
#include "core/chunk_format.hpp"

namespace engram::remote {

struct LocalTable {
  LocalTable() = default;
  LocalTable(const LocalTable&) = delete;
  LocalTable& operator=(const LocalTable&) = delete;
  ~LocalTable() { close(); }

  // Connects to the server on `socket` and opens table `name`: ENGRAM_OK,
  // or the failing call's code (engram_last_error() says why), with what
  // was opened closed again. Fills cols, ncols and signature.
  int open(const std::string& socket, const std::string& name);
  // A relay into the open table (capi/relay.h): ENGRAM_OK or its code.
  int open_relay();
  // Closes the relay, the table and the client, in that order.
  void close();

  engram_client* client = nullptr;
  engram_table* table = nullptr;
  engram_writer* relay = nullptr;
  const Column* cols = nullptr;  // the table's columns, while it is open
  uint32_t ncols = 0;
  uint64_t signature = 0;
};

}  // namespace engram::remote
