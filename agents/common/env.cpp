#include "agents/common/env.hpp"

#include "agents/common/breakout.hpp"
#include "agents/common/cartpole.hpp"

namespace engram::agents {

std::unique_ptr<Env> make_env(const std::string& name) {
  if (name == "cartpole") return std::make_unique<CartPole>();
  if (name == "breakout") return std::make_unique<Breakout>();
  return nullptr;
}

}  // namespace engram::agents
