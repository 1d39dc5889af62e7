#include "remote/local_table.hpp"

#include "capi/take.h"

namespace engram::remote {

int LocalTable::open(const std::string& socket, const std::string& name) {
  close();
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket.c_str();
  int e = engram_connect(&o, &client);
  if (e == ENGRAM_OK) e = engram_table_open(client, name.c_str(), &table);
  if (e != ENGRAM_OK) {
    close();
    return e;
  }
  cols = static_cast<const Column*>(engram_private_table_columns(table, &ncols));
  signature = engram_private_table_signature(table);
  return ENGRAM_OK;
}

int LocalTable::open_relay() { return engram_private_relay_open(client, table, &relay); }

void LocalTable::close() {
  if (relay) engram_writer_close(relay);
  if (table) engram_table_close(table);
  if (client) engram_disconnect(client);
  relay = nullptr;
  table = nullptr;
  client = nullptr;
  cols = nullptr;
  ncols = 0;
  signature = 0;
}

}  // namespace engram::remote
