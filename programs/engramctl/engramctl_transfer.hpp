// engramctl export and import (engramctl_transfer.cpp). Each returns
// engramctl's exit status, having said on stderr what went wrong.
#pragma once

#include <cstdint>
#include <string>

namespace engram {

int export_command(const std::string& socket, const std::string& table, const std::string& file);
int import_command(const std::string& socket, const std::string& file, const std::string& table, int32_t timeout_ms);

}  // namespace engram
