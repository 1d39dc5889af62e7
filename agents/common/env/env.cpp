#include "agents/common/env/env.hpp"

#include "agents/common/env/breakout.hpp"
#include "agents/common/env/cartpole.hpp"

namespace engram::agents {

std::unique_ptr<Env> make_env(const std::string& name) {
  if (name == "cartpole") return std::make_unique<CartPole>();
  if (name == "breakout") return std::make_unique<Breakout>();
  return nullptr;
}

EnvShape env_shape(const std::string& name) {
  std::unique_ptr<Env> probe = make_env(name);
  return {probe->observation_shape(), probe->observation_size(), probe->num_actions()};
}

}  // namespace engram::agents
